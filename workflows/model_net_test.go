package workflows

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// The model's network: the real Submit, Poll and Deliver activities and the real clients talk to fake providers
// of both protocols (httptest servers) and to a fake notify_url. Each task-creating request draws its answer,
// faults included; a created task is solved on the test clock and calls back by the pingback URL it was given.

// fakeProvider is one provider's server; flavor is "" for in.php.
type fakeProvider struct {
	name      string
	flavor    providers.Flavor
	srv       *httptest.Server
	busyUntil time.Time // answers no-slot until then: Submit then takes minutes of retries
	badSince  time.Time // since when its answers were only 5xx pages or lost: the breaker's evidence of an outage
	lacks     bool      // refuses reCAPTCHA tasks: ERROR_TASK_NOT_SUPPORTED (createTask), ERROR_NO_SUCH_METHOD (in.php)
}

// submitAnswers weigh what a task-creating request draws; "reset" and "504" lose the answer after the task was
// created, "500" is a gateway's page before anything was created.
var submitAnswers = map[string]int{"ok": 55, "reset": 7, "504": 6, "500": 4, "zero": 5, "noslot": 8, "unsolvable": 6, "config": 1}

// newNet starts the schedule's providers and notify_url and returns the real activities wired to them, with one
// circuit state (on the test clock) for every task of the schedule.
func (s *schedule) newNet() *activities.Activities {
	for _, task := range s.solves {
		task.withNotify()
	}
	a := &activities.Activities{CallbackBaseURL: "https://cb.example", CallbackSecret: "model-secret",
		NotifySecret: "whsec_" + "bW9kZWwtbm90aWZ5LXNlY3JldA==", NotifyAllowPrivate: true}
	var list []*providers.Provider
	for _, name := range s.routing.names {
		p := &fakeProvider{name: name, lacks: s.routing.lacks[name]}
		if name != "" && s.rng.IntN(2) == 0 {
			p.flavor = []providers.Flavor{callback.CapSolver, callback.AntiCaptcha, callback.CapMonster}[s.rng.IntN(3)]
		}
		p.srv = httptest.NewServer(s.serve(p))
		s.closers = append(s.closers, p.srv.Close)
		s.fakes = append(s.fakes, p)
		client := s.client(p)
		if name == "" {
			a.Provider = client
			return a
		}
		prof, _ := providers.ProfileOf(p.flavor)
		list = append(list, &providers.Provider{Name: name, Flavor: p.flavor, Client: client, PollInterval: prof.MinPollInterval,
			Price: s.routing.prices[name], Refunds: p.flavor == "" || prof.RefundsUnsolvable})
	}
	s.checkPricesAtStart(list)
	circuits := providers.DefaultCircuitSettings
	circuits.GiveUp = s.routing.giveUp
	s.breaker = providers.NewBreaker(circuits, s.env.Now)
	for _, name := range s.routing.names { // out of balance as the schedule starts: its circuit open for a minute
		if s.rng.IntN(4) == 0 {
			s.breaker.Record(name, providers.OutcomeZeroBalance)
		}
	}
	a.Providers = providers.NewSet(list, s.breaker)
	routing := map[bool]string{true: providers.RoutingScored}[s.routing.scored]
	a.Providers.Model = providers.NewModel(providers.File{Routing: routing, ExploreShare: &s.routing.explore})
	s.primeModel(a.Providers.Model)
	return a
}

// client is p's real client; a provider that is down refuses the connection (keep-alives off, so every request dials).
func (s *schedule) client(p *fakeProvider) providers.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		s.mu.Lock()
		down, _ := s.down(p.name)
		s.mu.Unlock()
		if down {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	h := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	if p.flavor != "" {
		c, err := providers.NewCreateTask(p.flavor, p.srv.URL, "model-key", providers.WithHTTPClient(h))
		s.must(err)
		return c
	}
	c, err := providers.NewInPHP(p.srv.URL, "model-key", providers.WithHTTPClient(h), providers.WithResultBatching(-1))
	s.must(err)
	return c
}

func (s *schedule) must(err error) {
	if err != nil {
		s.t.Fatal(err)
	}
}

// serve answers in.php/res.php or createTask/getTaskResult as p's protocol does.
func (s *schedule) serve(p *fakeProvider) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Task        map[string]any `json:"task"`
			CallbackURL string         `json:"callbackUrl"`
			TaskID      json.Number    `json:"taskId"`
		}
		// A body cut short (its client cancelled mid-write) never reached the provider's logic, as on a real one.
		if p.flavor != "" && json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/in.php":
			answer, task := s.created(p, r.FormValue("pingback"), r.FormValue("method") == "base64", r.FormValue("action"))
			s.answerCreate(w, p, answer, task)
		case "/createTask":
			action, _ := req.Task["pageAction"].(string)
			answer, task := s.created(p, req.CallbackURL, req.Task["type"] == "ImageToTextTask", action)
			s.answerCreate(w, p, answer, task)
		case "/res.php", "/getTaskResult":
			s.mu.Lock()
			word := s.refusal(p, activities.ResultsQueue)
			s.mu.Unlock()
			if word != "" {
				writeRefusal(w, p, word)
				return
			}
			s.answerResult(w, p, s.lookup(p, cmp.Or(r.FormValue("id"), req.TaskID.String())))
		default:
			http.NotFound(w, r)
		}
	}
}

// created draws the answer to a task-creating request at p, checking first that the request may be made at all and
// carries the task's reCAPTCHA v3 action (in.php's action, the task's pageAction).
func (s *schedule) created(p *fakeProvider, pingback string, image bool, action string) (answer string, task *providerTask) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wid, _, n := pingbackOf(pingback)
	m := s.solve(wid)
	m.checkRequestQueue(p.name, n)
	if want := m.in.Params["action"]; action != want {
		m.fail("action-reaches-provider", "%s at %q was sent action %q, not %q", wid, p.name, action, want)
	}
	m.checkNoSubmitWhileLostMayAnswer()
	m.checkNoSubmitWhileOpen()
	m.checkNoSubmitAfterAnswer()
	m.checkNoSubmitAfterProxyWord()
	now := m.env.Now()
	if word := s.refusal(p, activities.SubmitQueue); word != "" { // a burst: refused before anything else
		m.answers[n] = append(m.answers[n], "rate")
		return "rate:" + word, nil
	}
	answer = pick(m.rng, submitAnswers)
	if m.lostAtDeadline {
		answer, m.lostAtDeadline = "reset", false
	}
	if lost, _ := m.down(p.name); lost { // reached as it went down: written, created, the answer lost
		answer = "reset"
	}
	switch {
	case p.lacks && !image: // a provider without the task type refuses it before anything else
		answer = "unsupported"
		m.refused = append(m.refused, p.name)
	case now.Before(p.busyUntil):
		answer = "noslot"
	case answer == "noslot":
		p.busyUntil = now.Add(time.Duration(m.rng.IntN(300)) * time.Second)
	case answer == "ok" || answer == "reset" || answer == "504":
		instant := answer == "ok" && image && p.flavor == callback.CapSolver // as CapSolver answers image tasks
		// Anti-Captcha and CapMonster call back with the getTaskResult body, which names no task.
		unnamed := p.flavor == callback.AntiCaptcha || p.flavor == callback.CapMonster
		task = m.take(p.name, pingback, answer != "ok", instant, unnamed)
		task.image = image
		m.checkPlan()
	case answer == "config":
		m.keyRefused = true
	}
	if bad := answer == "504" || answer == "500" || answer == "reset"; !bad {
		p.badSince = time.Time{}
	} else if p.badSince.IsZero() {
		p.badSince = now
	}
	m.answers[n] = append(m.answers[n], answer)
	m.logf("%s at %q -> %s %v", map[bool]string{true: "createTask", false: "in.php"}[p.flavor != ""], p.name, answer, task)
	return answer, task
}

// answerCreate writes answer in p's protocol; a lost answer is a reset connection or a gateway's 5xx page.
func (s *schedule) answerCreate(w http.ResponseWriter, p *fakeProvider, answer string, task *providerTask) {
	if word, ok := strings.CutPrefix(answer, "rate:"); ok {
		writeRefusal(w, p, word)
		return
	}
	switch answer {
	case "reset":
		conn, _, err := http.NewResponseController(w).Hijack()
		s.must(err)
		_ = conn.(*net.TCPConn).SetLinger(0)
		_ = conn.Close()
		return
	case "504", "500":
		code, _ := strconv.Atoi(answer)
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "<html><body>Gateway error</body></html>")
		return
	}
	code := map[string]string{"zero": "ERROR_ZERO_BALANCE", "noslot": "ERROR_NO_SLOT_AVAILABLE",
		"unsolvable": "ERROR_CAPTCHA_UNSOLVABLE", "config": "ERROR_WRONG_USER_KEY", "unsupported": "ERROR_TASK_NOT_SUPPORTED"}[answer]
	if answer == "unsupported" && p.flavor == "" {
		code = "ERROR_NO_SUCH_METHOD" // in.php's word for a method it does not offer
	}
	switch {
	case p.flavor == "" && task != nil:
		writeJSON(w, map[string]any{"status": 1, "request": task.id})
	case p.flavor == "":
		writeJSON(w, map[string]any{"status": 0, "request": code})
	case task == nil:
		writeJSON(w, map[string]any{"errorId": 1, "errorCode": code})
	case task.instant:
		writeJSON(w, map[string]any{"errorId": 0, "taskId": json.Number(task.id), "status": "ready", "solution": map[string]any{solutionField[true]: task.code}})
	default:
		writeJSON(w, map[string]any{"errorId": 0, "taskId": json.Number(task.id)})
	}
}

// lookup is the task p holds under id, checking it is p's own and that its code did not already come with Submit.
func (s *schedule) lookup(p *fakeProvider, id string) *providerTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, task := range s.allTasks() {
		if task.id != id {
			continue
		}
		if task.provider != p.name {
			s.fail("polls-its-provider", "Poll asked %q for %s, which %q took", p.name, id, task.provider)
		}
		if task.instant {
			s.fail("polls-its-provider", "Poll asked for %s, whose code came with the Submit result", id)
		}
		if now := s.providerNow(); !now.Before(task.solveAt) && !task.unsolvable {
			s.arrive(task, now)
		} else if !now.Before(task.solveAt) && task.word != "" && task.wordAt.IsZero() {
			task.wordAt = now
		}
		return task
	}
	return nil
}

func (s *schedule) answerResult(w http.ResponseWriter, p *fakeProvider, task *providerTask) {
	s.mu.Lock()
	// A challenge it called back is ready: the confirmation it caused cannot come before it (providerNow is backlog early).
	ready := task != nil && (!s.providerNow().Before(task.solveAt) || task.more && !task.arrived.IsZero() && !task.unsolvable)
	s.mu.Unlock()
	switch {
	case task == nil && p.flavor == "":
		writeJSON(w, map[string]any{"status": 0, "request": "ERROR_WRONG_CAPTCHA_ID"})
	case task == nil:
		writeJSON(w, map[string]any{"errorId": 16, "errorCode": "ERROR_NO_SUCH_CAPCHA_ID"})
	case !ready && p.flavor == "":
		writeJSON(w, map[string]any{"status": 0, "request": "CAPCHA_NOT_READY"})
	case !ready:
		writeJSON(w, map[string]any{"errorId": 0, "status": "processing"})
	case task.word != "" && p.flavor == "":
		writeJSON(w, map[string]any{"status": 0, "request": task.word})
	case task.word != "":
		writeJSON(w, map[string]any{"errorId": 1, "errorCode": task.word})
	case task.unsolvable && p.flavor == "":
		writeJSON(w, map[string]any{"status": 0, "request": "ERROR_CAPTCHA_UNSOLVABLE"})
	case task.unsolvable:
		writeJSON(w, map[string]any{"errorId": 0, "status": "failed"})
	case p.flavor == "" && task.more:
		writeJSON(w, map[string]any{"status": 1, "request": task.code, "useragent": userAgentOf(task)})
	case p.flavor == "":
		writeJSON(w, map[string]any{"status": 1, "request": task.code})
	case task.more:
		writeJSON(w, map[string]any{"errorId": 0, "status": "ready", "solution": map[string]any{"token": task.code, "userAgent": userAgentOf(task)}})
	default:
		writeJSON(w, map[string]any{"errorId": 0, "status": "ready", "solution": map[string]any{solutionField[task.image]: task.code}})
	}
}

// solutionField is where getTaskResult puts the code: an image task's text, else a token.
var solutionField = map[bool]string{true: "text", false: "gRecaptchaResponse"}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// pingbackOf reads the workflow, run and submission a pingback URL names, as the ingress does.
func pingbackOf(pingback string) (wid, runID string, n int) {
	u, err := url.Parse(pingback)
	if err != nil {
		return "", "", 0
	}
	n, _ = strconv.Atoi(u.Query().Get("s"))
	return path.Base(u.Path), u.Query().Get("r"), n
}

// allTasks are the provider tasks of every task of the schedule.
func (s *schedule) allTasks() []*providerTask {
	var all []*providerTask
	for _, m := range s.solves {
		all = append(all, m.tasks...)
	}
	return all
}

// withNotify starts the schedule's notify_url: it records every delivery and refuses it while the schedule's
// downstream is down.
func (m *model) withNotify() {
	if m.in.NotifyURL == "" {
		return
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if m.delivery(r.Header.Get("webhook-id"), body) != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	m.closers = append(m.closers, srv.Close)
	m.in.NotifyURL = srv.URL + "/hook"
}
