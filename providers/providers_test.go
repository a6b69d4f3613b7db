package providers

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/captchaflow/captchaflow/providers/callback"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

const goodFile = `
providers:
  - name: captchaai
    protocol: inphp
    base_url: https://ocr.providers.com
    api_key_env: CAPTCHAAI_API_KEY
    threads: 50
    submits_per_second: 5
  - name: capsolver
    protocol: createtask
    flavor: capsolver
    api_key_env: CAPSOLVER_API_KEY
`

func TestParseFileAcceptsTheDocumentedExample(t *testing.T) {
	f, err := ParseFile([]byte(goodFile), env(map[string]string{"CAPTCHAAI_API_KEY": "k1", "CAPSOLVER_API_KEY": "k2"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Providers) != 2 || f.Providers[1].Flavor != "capsolver" || f.Providers[0].Threads != 50 {
		t.Fatalf("parsed %+v", f)
	}
	set, err := Build(f, env(map[string]string{"CAPTCHAAI_API_KEY": "k1", "CAPSOLVER_API_KEY": "k2"}), time.Second, DefaultCircuitSettings)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.All()[0].Name + "," + set.All()[1].Name; got != "captchaai,capsolver" || !set.Routed {
		t.Fatalf("set %s routed %v", got, set.Routed)
	}
	// An account's budgets: the file's, else the provider's documented ones: none for these two.
	if got := []Rates{set.All()[0].Rates, set.All()[1].Rates}; got[0] != (Rates{Submits: 5}) || got[1] != (Rates{}) {
		t.Fatalf("rates %+v", got)
	}
}

// Every problem is reported at once, each naming its field; a key's value never appears.
func TestParseFileNamesEveryBadField(t *testing.T) {
	bad := `
providers:
  - name: Bad_Name
    protocol: inphp
    flavor: capsolver
    api_key_env: MISSING_KEY
  - name: x
    protocol: createtask
    flavor: deathbycaptcha
    api_key_env: SET_KEY
    threads: 5001
    submits_per_second: -1
    results_per_second: 20000
  - name: x
    protocol: soap
    api_key_env: "not a var"
    threads: -1
`
	_, err := ParseFile([]byte(bad), env(map[string]string{"SET_KEY": "s3cr3t-value"}))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"providers[0].name", "providers[0].flavor: only for protocol createtask", "providers[0].base_url: required",
		"providers[0].api_key_env: MISSING_KEY is not set", "providers[1].flavor: must be one of", "providers[1].threads: must be from 0 to 5000",
		"providers[2].protocol", "providers[2].api_key_env: must be an environment variable", "providers[2].threads",
		`providers[2].name: "x" is used twice`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "s3cr3t-value") {
		t.Error("the key's value is in the error")
	}
}

func TestParseFileRefusesUnknownFieldsAndEmptyFiles(t *testing.T) {
	for name, content := range map[string]string{
		"unknown field": "providers:\n  - name: a\n    protocol: inphp\n    base_url: https://x\n    api_key: inline\n    api_key_env: K\n",
		"empty":         "providers: []\n",
	} {
		if _, err := ParseFile([]byte(content), env(map[string]string{"K": "k"})); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCandidatesRestrictReorderExcludeAvoid(t *testing.T) {
	set := &Set{Routed: true}
	for _, n := range []string{"a", "b", "c"} {
		set.list = append(set.list, &Provider{Name: n})
	}
	names := func(ps []*Provider) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		preferred, excluded, avoided []string
		want                         string
	}{
		{nil, nil, nil, "a,b,c"},
		{[]string{"c", "a"}, nil, nil, "c,a"},
		{[]string{"zz", "b"}, nil, nil, "b"},
		{nil, []string{"a"}, nil, "b,c"},
		{nil, nil, []string{"a"}, "b,c,a"},
		{[]string{"a"}, nil, []string{"a"}, "a"}, // pinned: avoided but still the only one
		{[]string{"a"}, []string{"a"}, nil, ""},
	}
	for _, c := range cases {
		if got := names(set.Candidates(c.preferred, c.excluded, c.avoided)); got != c.want {
			t.Errorf("Candidates(%v, %v, %v) = %s, want %s", c.preferred, c.excluded, c.avoided, got, c.want)
		}
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestBreakerOpensOnUnreachableAndHalfOpensOneProbe(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	b := NewBreaker(DefaultCircuitSettings, c.now)
	for i := range 3 {
		if ok, _, _ := b.Allow("a"); !ok {
			t.Fatalf("closed circuit refused request %d", i)
		}
		opened := b.Record("a", OutcomeUnreachable)
		if (opened != "") != (i == 2) {
			t.Fatalf("request %d: opened %q", i, opened)
		}
	}
	if ok, at, reason := b.Allow("a"); ok || reason != string(OutcomeUnreachable) || !at.Equal(c.t.Add(30*time.Second)) {
		t.Fatalf("open circuit: ok %v at %v reason %s", ok, at, reason)
	}
	b.RecordPoll("a", OutcomeUnreachable) // a task's poll while open: the circuit half-opens on time all the same
	c.advance(30 * time.Second)
	if ok, _, _ := b.Allow("a"); !ok {
		t.Fatal("no probe once half-open")
	}
	if ok, _, _ := b.Allow("a"); ok {
		t.Fatal("a second probe while the first is out")
	}
	b.Record("a", OutcomeUnreachable) // the probe failed: open for twice as long
	if _, at, _ := b.Allow("a"); !at.Equal(c.t.Add(time.Minute)) {
		t.Fatalf("reopened until %v", at)
	}
	if b.GivenUp("a") || b.DownFor("a") != 30*time.Second {
		t.Fatalf("given up %v, down for %v after a probe failed 30 s in", b.GivenUp("a"), b.DownFor("a"))
	}
	c.advance(time.Minute)
	if ok, _, _ := b.Allow("a"); !ok {
		t.Fatal("no probe once half-open again")
	}
	b.Record("a", OutcomeOK)
	if b.State("a") != StateClosed {
		t.Fatal("a success did not close it")
	}
}

func TestBreakerZeroBalanceKeyAndNoSlotBudget(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	b := NewBreaker(DefaultCircuitSettings, c.now)
	if b.Record("a", OutcomeZeroBalance) != string(OutcomeZeroBalance) || !b.IsOpen("a") {
		t.Fatal("zero balance did not open")
	}
	if b.Record("k", OutcomeKeyRefused) != string(OutcomeKeyRefused) {
		t.Fatal("a refused key did not open")
	}
	for range 12 { // no slot every 5 s: open once the 60 s budget is spent
		if b.Record("n", OutcomeNoSlot) != "" {
			t.Fatalf("opened after %v of no-slot", c.t.Sub(time.Unix(1000, 0)))
		}
		c.advance(5 * time.Second)
	}
	if b.Record("n", OutcomeNoSlot) != string(OutcomeNoSlot) {
		t.Fatal("no-slot past its budget did not open")
	}
}

func TestOutcomeOf(t *testing.T) {
	cases := map[Outcome]error{
		OutcomeOK:          nil,
		OutcomeUnreachable: &Error{Op: "submit", Class: callback.ClassTransient, Err: errors.New("connection refused")},
		OutcomeZeroBalance: &Error{Op: "submit", Code: "ERROR_ZERO_BALANCE", Class: callback.ClassTransient},
		OutcomeNoSlot:      &Error{Op: "submit", Code: "ERROR_NO_SLOT_AVAILABLE", Class: callback.ClassTransient},
		OutcomeKeyRefused:  &Error{Op: "submit", Code: "ERROR_WRONG_USER_KEY", Class: callback.ClassConfig},
		OutcomeOther:       &Error{Op: "get", Code: "ERROR_CAPTCHA_UNSOLVABLE", Class: callback.ClassResubmit},
	}
	for want, err := range cases {
		if got := OutcomeOf(err); got != want {
			t.Errorf("OutcomeOf(%v) = %s, want %s", err, got, want)
		}
	}
	if got := OutcomeOf(&Error{Op: "submit", HTTPStatus: 502, Class: callback.ClassTransient}); got != OutcomeUnreachable {
		t.Errorf("502: %s", got)
	}
}

func TestBreakerPollAnswersProveReachabilityOnly(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	b := NewBreaker(DefaultCircuitSettings, c.now)
	b.Record("z", OutcomeZeroBalance)
	if b.RecordPoll("z", OutcomeOther) != "" || !b.IsOpen("z") {
		t.Fatal("a poll's answer closed a zero-balance circuit")
	}
	for range 12 { // no slot every 5 s, a task's poll answered in between: the run goes on
		b.Record("n", OutcomeNoSlot)
		b.RecordPoll("n", OutcomeOther)
		c.advance(5 * time.Second)
	}
	if b.Record("n", OutcomeNoSlot) != string(OutcomeNoSlot) {
		t.Fatal("polls answered during a no-slot run kept it from opening")
	}
	for range 3 {
		b.Record("u", OutcomeUnreachable)
	}
	if b.RecordPoll("u", OutcomeOK); b.State("u") != StateClosed || b.DownFor("u") != 0 {
		t.Fatal("a poll's answer did not close an unreachable circuit")
	}
	for range 3 {
		if b.RecordPoll("p", OutcomeUnreachable); b.IsOpen("p") {
			break
		}
	}
	if !b.IsOpen("p") {
		t.Fatal("unreachable polls did not open the circuit")
	}
}

// A blip, then two minutes without a request: the circuit half-opens and its stale failures give nothing up; a
// failure after the silence starts a new run, and only failures for PROVIDER_GIVE_UP give up.
func TestBreakerEvidenceAges(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	b := NewBreaker(DefaultCircuitSettings, c.now)
	for range 3 {
		b.Record("a", OutcomeUnreachable)
	}
	c.advance(2 * time.Minute)
	if b.GivenUp("a") || b.DownFor("a") != 0 || b.State("a") != StateHalfOpen {
		t.Fatalf("after a blip and 2 min of silence: given up %v, down for %v, state %d", b.GivenUp("a"), b.DownFor("a"), b.State("a"))
	}
	giveUp := DefaultCircuitSettings.GiveUp
	for start := c.t; !b.GivenUp("a") && c.t.Sub(start) <= 2*giveUp; c.advance(5 * time.Second) {
		b.RecordPoll("a", OutcomeUnreachable)
	}
	if !b.GivenUp("a") || b.DownFor("a") != giveUp {
		t.Fatalf("given up %v after %v of failing polls, want after %v", b.GivenUp("a"), b.DownFor("a"), giveUp)
	}
	if b.RecordPoll("a", OutcomeOK); b.GivenUp("a") || b.DownFor("a") != 0 {
		t.Fatal("an answer did not end the run")
	}
}

// Avoided providers go last in the order they were avoided: a task that met two bad ones tries the earlier one first.
func TestCandidatesPutTheLatestAvoidedLast(t *testing.T) {
	set := NewSet([]*Provider{{Name: "a"}, {Name: "b"}, {Name: "c"}}, nil)
	var got []string
	for _, p := range set.Candidates(nil, nil, []string{"b", "a"}) {
		got = append(got, p.Name)
	}
	if want := []string{"c", "b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Only 2captcha documents an account rate: its hosts are paced by default, CaptchaAI and a self-hosted solver are not.
func TestDocumentedRatesFollowTheProvider(t *testing.T) {
	for base, want := range map[string]Rates{"https://2captcha.com": InPHPRates, "http://api.2captcha.com/": InPHPRates,
		"https://ocr.captchaai.com": {}, "http://127.0.0.1:8081": {}, "https://not2captcha.com": {}, "%": {}} {
		if got := DocumentedRates(base); got != want {
			t.Errorf("%s: %+v, want %+v", base, got, want)
		}
	}
	if p, _ := ProfileOf("anticaptcha"); p.Rates != (Rates{}) {
		t.Errorf("Anti-Captcha publishes no rate, paced by default at %+v", p.Rates)
	}
}
