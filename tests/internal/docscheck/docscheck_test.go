package docscheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSlugFollowsGitHub(t *testing.T) {
	for heading, want := range map[string]string{
		"Configuration (env, or the flag in brackets; flags win)": "configuration-env-or-the-flag-in-brackets-flags-win",
		"Lost `in.php` answers":                                   "lost-inphp-answers",
		"`make run` and `TASK_QUEUE`":                             "make-run-and-task_queue",
		"Callback → result, **C = 20**":                           "callback--result-c--20",
		"See [the contract](docs/contract.md)":                    "see-the-contract",
		"Déjà vu":                                                 "déjà-vu",
	} {
		require.Equal(t, want, Slug(heading), heading)
	}
}

func TestAnchorsNumberRepeatedHeadings(t *testing.T) {
	anchors := Anchors("# A\n## Results\n```\n# not a heading\n```\n### Results\n<a id=\"here\"></a>\n")
	require.Equal(t, map[string]bool{"a": true, "results": true, "results-1": true, "here": true}, anchors)
}

func TestBrokenLinksFindsMissingFilesAndAnchors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("docs/b.md", "# B\n## Part two\n")
	write("README.md", "# A\n[ok](docs/b.md#part-two) [ok](#a) [ok](https://example.com/#x) `[code](nowhere.md)`\n"+
		"[gone](docs/c.md) [bad anchor](docs/b.md#part-three) [self](#b)\n```\n[in a block](nowhere.md)\n```\n")
	problems, err := BrokenLinks(dir, []string{"README.md", "docs/b.md"})
	require.NoError(t, err)
	require.Equal(t, []string{
		"README.md:3: docs/c.md: no such file",
		`README.md:3: docs/b.md#part-three: docs/b.md has no heading or anchor "part-three"`,
		`README.md:3: #b: README.md has no heading or anchor "b"`,
	}, problems)
}

func TestCodeBlockAndSection(t *testing.T) {
	text := "# T\n## One\n" + Marker("x") + "\n```sh\necho hi\n```\n### Sub\ntext\n## Two\n"
	body, err := CodeBlock(text, "x")
	require.NoError(t, err)
	require.Equal(t, "echo hi\n", body)
	_, err = CodeBlock(text, "y")
	require.Error(t, err)
	sec, err := Section(text, "One")
	require.NoError(t, err)
	require.Contains(t, sec, "### Sub")
	require.NotContains(t, sec, "Two")
}
