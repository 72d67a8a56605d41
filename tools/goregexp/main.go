// Command goregexp answers, with Go's own regexp package (the one kured compiles --alert-filter-regexp
// with), whether patterns compile and what they match. It is the oracle of pykured's RE2 differential
// (tests/gocompat/test_goregexp_go.py); build it with `tools/kured-build goregexp`.
//
// Protocol: one JSON object per line on stdin, {"p": PATTERN, "in": [TEXT, ...]}; one JSON object per line on
// stdout, in order: {"err": "<regexp.Compile's error>", "m": null} when the pattern is refused, otherwise
// {"m": [MATCH, ...]} with, for each TEXT, null when the pattern does not match it and the leftmost match
// (FindString's text) when it does.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
)

type query struct {
	Pattern string   `json:"p"`
	Inputs  []string `json:"in"`
}

type answer struct {
	Err     *string   `json:"err,omitempty"`
	Matches []*string `json:"m"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	defer func() { _ = out.Flush() }()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for in.Scan() {
		var q query
		if err := json.Unmarshal(in.Bytes(), &q); err != nil {
			fmt.Fprintf(os.Stderr, "goregexp: bad line %q: %v\n", in.Text(), err)
			os.Exit(2)
		}
		var a answer
		re, err := regexp.Compile(q.Pattern)
		if err != nil {
			text := err.Error()
			a.Err = &text
		} else {
			a.Matches = make([]*string, len(q.Inputs))
			for i, text := range q.Inputs {
				if loc := re.FindStringIndex(text); loc != nil {
					found := text[loc[0]:loc[1]]
					a.Matches[i] = &found
				}
			}
		}
		if err := enc.Encode(a); err != nil {
			fmt.Fprintf(os.Stderr, "goregexp: %v\n", err)
			os.Exit(2)
		}
		if err := out.Flush(); err != nil {
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "goregexp: %v\n", err)
		os.Exit(2)
	}
}
