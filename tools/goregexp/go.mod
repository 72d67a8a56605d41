module pykured.dev/tools/goregexp

go 1.26.0
