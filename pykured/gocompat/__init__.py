"""Go compatibility: Go's value grammars and formats, as kured (a Go program) reads and prints them.

Standard library only (an import-linter contract enforces it), pure functions; the one exception is
:mod:`~pykured.gocompat.goregexp`, which compiles Go's patterns with RE2's own bindings (``google-re2``):

* :mod:`~pykured.gocompat.goflags` — pflag values, ``time.Duration``, ``strconv`` (``Quote``, bools, ints);
* :mod:`~pykured.gocompat.gofmt` — ``fmt.Sprintf`` for string arguments (kured's message templates);
* :mod:`~pykured.gocompat.goregexp` — Go's ``regexp`` through RE2 (``--alert-filter-regexp``);
* :mod:`~pykured.gocompat.gocsv` — pflag's CSV ``stringSlice`` values;
* :mod:`~pykured.gocompat.goshlex` — ``go-shlex`` splitting of reboot commands;
* :mod:`~pykured.gocompat.gourl` — ``net/url`` parsing as shoutrrr sees a notification URL;
* :mod:`~pykured.gocompat.logrus` — logrus text and JSON log lines.
"""
