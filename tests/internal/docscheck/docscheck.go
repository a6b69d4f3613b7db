// Package docscheck reads the project's markdown the way GitHub renders it (headings, anchors, links, marked code
// blocks), so tests can hold the documents to the code. It is used by tests only.
package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Marker introduces a code block that CI runs or compiles: `<!-- ci:NAME -->` on the line before the fence.
func Marker(name string) string { return "<!-- ci:" + name + " -->" }

// CodeBlock returns the body of the fenced code block that follows the marker `<!-- ci:name -->`.
func CodeBlock(text, name string) (string, error) {
	_, after, ok := strings.Cut(text, Marker(name)+"\n")
	if !ok {
		return "", fmt.Errorf("no %s marker", Marker(name))
	}
	if !strings.HasPrefix(after, "```") {
		return "", fmt.Errorf("%s is not followed by a fenced code block", Marker(name))
	}
	_, after, _ = strings.Cut(after, "\n")
	body, _, ok := strings.Cut(after, "\n```")
	if !ok {
		return "", fmt.Errorf("the code block after %s is not closed", Marker(name))
	}
	return body + "\n", nil
}

// Line is one line of a document outside fenced code blocks, with its 1-based number.
type Line struct {
	N    int
	Text string
}

// Prose returns the lines outside fenced code blocks (``` or ~~~).
func Prose(text string) []Line {
	var out []Line
	fence := ""
	for i, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```"), strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
		default:
			out = append(out, Line{N: i + 1, Text: l})
		}
	}
	return out
}

var (
	headingRE  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
	inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// Heading is an ATX heading: its level and its text as written.
type Heading struct {
	Level int
	Text  string
}

// Headings lists the document's headings outside code blocks.
func Headings(text string) []Heading {
	var out []Heading
	for _, l := range Prose(text) {
		if m := headingRE.FindStringSubmatch(l.Text); m != nil {
			out = append(out, Heading{Level: len(m[1]), Text: m[2]})
		}
	}
	return out
}

// Slug is GitHub's anchor for a heading: the rendered text lowercased, every character but letters, digits,
// marks, `_`, `-` and spaces dropped, spaces turned into hyphens.
func Slug(heading string) string {
	text := inlineLink.ReplaceAllString(heading, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case unicode.IsLetter(r), unicode.IsNumber(r), unicode.IsMark(r), r == '_', r == '-':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Anchors are the fragment identifiers a document offers: its headings' slugs (a repeated slug gets -1, -2, …, as
// on GitHub) and explicit `<a id>` / `<a name>` anchors.
func Anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range Headings(text) {
		s := Slug(h.Text)
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	for _, l := range Prose(text) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.Text, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// Section returns the text under the heading whose text is title, up to the next heading of the same or a higher
// level.
func Section(text, title string) (string, error) {
	lines := strings.Split(text, "\n")
	start, level := -1, 0
	for _, l := range Prose(text) {
		m := headingRE.FindStringSubmatch(l.Text)
		if m == nil {
			continue
		}
		switch {
		case start < 0 && m[2] == title:
			start, level = l.N, len(m[1])
		case start >= 0 && len(m[1]) <= level:
			return strings.Join(lines[start:l.N-1], "\n"), nil
		}
	}
	if start < 0 {
		return "", fmt.Errorf("no heading %q", title)
	}
	return strings.Join(lines[start:], "\n"), nil
}

// FirstColumn returns the first cell of every table row in text, header rows included (separator rows left out).
func FirstColumn(text string) []string {
	var out []string
	for _, l := range Prose(text) {
		t := strings.TrimSpace(l.Text)
		if !strings.HasPrefix(t, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(t, "|"), "|")
		first := strings.TrimSpace(cells[0])
		if strings.Trim(first, "-: ") == "" {
			continue // the separator row
		}
		out = append(out, first)
	}
	return out
}

// ReadFile reads a document relative to root.
func ReadFile(root, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, name))
	return string(b), err
}
