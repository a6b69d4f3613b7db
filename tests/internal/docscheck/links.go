package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	codeSpan      = regexp.MustCompile("`[^`]*`")
	linkTarget    = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	referenceLink = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(\S+)`)
	schemeRE      = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// Link is a link's target as written, and the line it is on.
type Link struct {
	Line   int
	Target string
}

// Links lists the inline, image and reference-definition links outside code blocks and code spans.
func Links(text string) []Link {
	var out []Link
	for _, l := range Prose(text) {
		line := codeSpan.ReplaceAllString(l.Text, "")
		for _, m := range linkTarget.FindAllStringSubmatch(line, -1) {
			out = append(out, Link{Line: l.N, Target: m[1]})
		}
		if m := referenceLink.FindStringSubmatch(line); m != nil {
			out = append(out, Link{Line: l.N, Target: m[1]})
		}
	}
	return out
}

// BrokenLinks returns a problem for every relative link in the files (paths relative to root) whose file does not
// exist or whose #anchor is not a heading or anchor of the target document. Links with a scheme are not checked.
func BrokenLinks(root string, files []string) ([]string, error) {
	var problems []string
	for _, name := range files {
		text, err := ReadFile(root, name)
		if err != nil {
			return nil, err
		}
		for _, l := range Links(text) {
			if problem := checkLink(root, name, text, l.Target); problem != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", name, l.Line, l.Target, problem))
			}
		}
	}
	return problems, nil
}

func checkLink(root, from, fromText, target string) string {
	if target == "" {
		return "empty link"
	}
	if schemeRE.MatchString(target) {
		return ""
	}
	path, anchor, _ := strings.Cut(target, "#")
	targetText, targetName := fromText, from
	if path != "" {
		targetName = filepath.Join(filepath.Dir(from), path)
		info, err := os.Stat(filepath.Join(root, targetName))
		if err != nil {
			return "no such file"
		}
		if anchor == "" {
			return ""
		}
		if info.IsDir() || !strings.HasSuffix(targetName, ".md") {
			return "an anchor into something that is not a markdown file"
		}
		if targetText, err = ReadFile(root, targetName); err != nil {
			return err.Error()
		}
	}
	if anchor != "" && !Anchors(targetText)[anchor] {
		return fmt.Sprintf("%s has no heading or anchor %q", targetName, anchor)
	}
	return ""
}
