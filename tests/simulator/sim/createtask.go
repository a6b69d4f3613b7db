package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// The createTask protocol (Config.Protocol createtask), as the flavor's profile declares it (package createtask):
// POST /createTask, /getTaskResult, /getBalance and the flavor's report calls, JSON in and out. It runs on the same
// task model as in.php — faults, rules, threads, balance, reports, pingbacks — only the wire differs. Task types
// and their required fields come from createtask's declared table, reversed.

// createTask-protocol error codes the in.php protocol spells otherwise.
const (
	ErrorTaskAbsent       = "ERROR_TASK_ABSENT"
	ErrorTaskNotSupported = "ERROR_TASK_NOT_SUPPORTED"
	ErrorNoSuchCaptchaID  = "ERROR_NO_SUCH_CAPCHA_ID"
	// CapSolver's own spellings (https://docs.capsolver.com/guide/api-error).
	ErrorInvalidTaskData   = "ERROR_INVALID_TASK_DATA"
	ErrorTaskIDInvalid     = "ERROR_TASKID_INVALID"
	ErrorCaptchaSolveFaild = "ERROR_CAPTCHA_SOLVE_FAILED"
)

// uuidPrefix makes CapSolver-style string task IDs from the numeric ones: the same ID, UUID-shaped.
const uuidPrefix = "00000000-0000-4000-8000-"

// formatID is a task ID as this process hands it out.
func (s *Simulator) formatID(id int64) string {
	if s.cfg.Protocol == ProtocolCreateTask && !s.profile.NumericTaskID {
		return fmt.Sprintf("%s%012d", uuidPrefix, id)
	}
	return strconv.FormatInt(id, 10)
}

// parseID reverses formatID.
func (s *Simulator) parseID(id string) (int64, bool) {
	if s.cfg.Protocol == ProtocolCreateTask && !s.profile.NumericTaskID {
		rest, ok := strings.CutPrefix(id, uuidPrefix)
		if !ok {
			return 0, false
		}
		id = rest
	}
	n, err := strconv.ParseInt(id, 10, 64)
	return n, err == nil
}

func (s *Simulator) createTaskRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /createTask", s.handleCreateTask)
	mux.HandleFunc("POST /getTaskResult", s.handleGetTaskResult)
	mux.HandleFunc("POST /getBalance", s.handleGetBalance)
	seen := map[string]bool{}
	for _, rule := range s.profile.Reports {
		endpoint := rule.Endpoint
		if seen[endpoint] {
			continue
		}
		seen[endpoint] = true
		mux.HandleFunc("POST /"+endpoint, func(w http.ResponseWriter, r *http.Request) { s.handleCTReport(w, r, endpoint) })
	}
}

// ctRequest is every createTask-protocol request body; sim_fault and sim_solve_ms are the simulator's own, as on
// in.php.
type ctRequest struct {
	ClientKey   string          `json:"clientKey"`
	Task        map[string]any  `json:"task"`
	CallbackURL string          `json:"callbackUrl"`
	TaskID      json.RawMessage `json:"taskId"`
	Result      struct {
		Invalid bool `json:"invalid"`
	} `json:"result"`
	SimFault   string `json:"sim_fault"`
	SimSolveMS *int64 `json:"sim_solve_ms"`
}

// decodeCT reads a request body; a body that is not one is an error reply.
func decodeCT(w http.ResponseWriter, r *http.Request, limit int64) (ctRequest, *reply) {
	var req ctRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		rp := errReplyf(ErrorBadParameters, "The request body is not a JSON object.")
		return req, &rp
	}
	return req, nil
}

// ctID reads a taskId as a number's digits or a string.
func ctID(raw json.RawMessage) string {
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func (s *Simulator) handleCreateTask(w http.ResponseWriter, r *http.Request) {
	req, bad := decodeCT(w, r, maxRequestBytes)
	if bad != nil {
		s.writeCT(w, s.reject(*bad), nil)
		return
	}
	rp, sub := s.createTask(req)
	s.holdAnswer(r, rp) // submit_stall_ms, submit_lost: may not return
	if writeGatewayError(w, rp) {
		return
	}
	s.writeCT(w, rp, s.createdDoc(rp, sub))
}

// createTask checks one request as the flavor would and, if acceptable, creates the task.
func (s *Simulator) createTask(req ctRequest) (reply, submission) {
	if rp, ok := s.checkKey(req.ClientKey); !ok {
		rp.value = ctCode(rp.value, s.profile.Flavor) // counted as answered
		return s.reject(rp), submission{}
	}
	if rp, ok := s.admitSubmitFor(req.ClientKey); !ok {
		return rp, submission{}
	}
	sub, rp, ok := s.ctSubmission(req)
	if !ok {
		return s.reject(rp), sub
	}
	return s.accept(sub), sub
}

func (s *Simulator) ctSubmission(req ctRequest) (submission, reply, bool) {
	if req.Task == nil {
		return submission{}, errReply(ErrorTaskAbsent), false
	}
	typ, _ := req.Task["type"].(string)
	kind, spec, ok := s.matchTask(typ, req.Task)
	if !ok || slices.Contains(s.cfg.Refuse, typ) {
		return submission{}, errReplyf(ErrorTaskNotSupported, "task type "+strconv.Quote(typ)+"."), false
	}
	if rp, ok := s.checkTaskFields(kind, spec, req.Task); !ok {
		return submission{}, rp, false
	}
	proxy := ctProxy(req.Task)
	if typ == spec.Proxied && typ != spec.Type && proxy == nil { // a type of its own needs its proxy, as providers say
		return submission{}, errReplyf(ErrorProxyMissing, "task type "+strconv.Quote(typ)+" needs proxyAddress."), false
	}
	pingback, rp, ok := parsePingback(req.CallbackURL)
	if !ok {
		return submission{}, rp, false
	}
	faults, err := ParseFaultSpec(req.SimFault)
	if err != nil {
		return submission{}, errReplyf(ErrorBadParameters, "sim_fault: "+err.Error()), false
	}
	ua, _ := req.Task["userAgent"].(string)
	sub := submission{key: req.ClientKey, method: methodOf(kind), taskType: typ, kind: kind, pingback: pingback, faults: faults,
		proxy: proxy, userAgent: ua}
	if req.SimSolveMS != nil {
		if *req.SimSolveMS < 0 {
			return sub, errReplyf(ErrorBadParameters, "sim_solve_ms must be a non-negative integer"), false
		}
		d := time.Duration(*req.SimSolveMS) * time.Millisecond
		sub.solveOverride = &d
	}
	return sub, reply{}, true
}

// matchTask finds the kind whose task, for this flavor, has this type and whose constant fields the task carries;
// of several (Anti-Captcha's GeeTest v3 and v4 share a type), the one with the most constants matched.
func (s *Simulator) matchTask(typ string, task map[string]any) (providers.Kind, providers.TaskSpec, bool) {
	var best providers.Kind
	var bestSpec providers.TaskSpec
	bestScore := -1
	for _, kind := range providers.Kinds {
		spec, ok := providers.TaskFor(s.profile.Flavor, kind)
		if !ok || spec.Type != typ && spec.Proxied != typ || !constsMatch(spec.Const, task) || len(spec.Const) <= bestScore {
			continue
		}
		best, bestSpec, bestScore = kind, spec, len(spec.Const)
	}
	return best, bestSpec, bestScore >= 0
}

func constsMatch(consts, task map[string]any) bool {
	for k, want := range consts {
		if fmt.Sprint(task[k]) != fmt.Sprint(want) {
			return false
		}
	}
	return true
}

// checkTaskFields refuses a task without a field its type requires, and an image that is not one.
func (s *Simulator) checkTaskFields(kind providers.Kind, spec providers.TaskSpec, task map[string]any) (reply, bool) {
	for _, f := range spec.Fields {
		if f.Required && f.Default == "" && pathValue(task, f.Path) == nil {
			return errReplyf(s.badTaskCode(), f.Path+" is required for "+spec.Type+"."), false
		}
	}
	if kind == providers.KindImage {
		body, _ := task["body"].(string)
		return checkBase64Image(body)
	}
	return reply{}, true
}

// badTaskCode is what the flavor answers for a task missing a field.
func (s *Simulator) badTaskCode() string {
	if s.profile.Flavor == callback.CapSolver {
		return ErrorInvalidTaskData
	}
	return ErrorBadParameters
}

// pathValue reads a dotted path; a missing or empty (or blank) string value is nil.
func pathValue(obj map[string]any, path string) any {
	head, rest, nested := strings.Cut(path, ".")
	v := obj[head]
	if !nested {
		if str, ok := v.(string); ok && strings.TrimSpace(str) == "" {
			return nil
		}
		return v
	}
	child, _ := v.(map[string]any)
	return pathValue(child, rest)
}

// createdDoc is createTask's success answer: the task ID, and for a kind the flavor solves within the call
// (CapSolver's image recognition) the solution too.
func (s *Simulator) createdDoc(rp reply, sub submission) map[string]any {
	if !rp.ok {
		return nil
	}
	doc := map[string]any{"taskId": s.idJSON(rp.value)}
	if s.profile.Flavor == callback.CapSolver && sub.kind == providers.KindImage { // CapSolver solves images within the call
		s.mu.Lock()
		if t := s.lookup(sub.key, rp.value); t != nil && !t.plan.unsolvable {
			doc["status"], doc["solution"] = "ready", s.solutionFor(t)
		}
		s.mu.Unlock()
	}
	return doc
}

// idJSON is a task ID as the flavor writes it: a number or a string.
func (s *Simulator) idJSON(id string) any {
	if s.profile.NumericTaskID {
		return json.Number(id)
	}
	return id
}

// solutionFor is a solved task's solution object in its task's documented shape; every field carries CodeFor(id).
// Caller holds mu.
func (s *Simulator) solutionFor(t *task) map[string]any {
	spec, _ := providers.TaskFor(s.profile.Flavor, t.kind)
	code := CodeFor(t.idStr)
	out := map[string]any{}
	for _, f := range spec.Solution.Fields {
		out[f] = code
	}
	if spec.Solution.Cookie != "" {
		out["cookies"] = map[string]string{spec.Solution.Cookie: code, "sim_session": "1"}
	}
	if ua := t.answerAgent(); ua != "" {
		out["userAgent"] = ua
	}
	return out
}

// writeCT answers in the protocol's envelope: errorId 0 and doc, or errorId 1 with the code. A flavor that answers
// errors with a status (CapSolver) gets 400, or 401 for a key error.
func (s *Simulator) writeCT(w http.ResponseWriter, rp reply, doc map[string]any) {
	status := http.StatusOK
	if !rp.ok {
		code := ctCode(rp.value, s.profile.Flavor)
		doc = map[string]any{"errorId": 1, "errorCode": code, "errorDescription": strings.TrimSpace(errorTexts[rp.value] + " " + rp.detail)}
		if s.profile.Flavor == callback.CapSolver { // CapSolver answers errors with 4xx and the envelope
			status = http.StatusBadRequest
			if code == ErrorKeyDoesNotExist {
				status = http.StatusUnauthorized
			}
		}
		if refusal := rateRefusals[s.profile.Flavor]; refusal.status != 0 && (code == refusal.submit || code == refusal.result) {
			status = refusal.status // a rate refusal with a status of its own
		}
	} else if doc == nil {
		doc = map[string]any{}
	}
	if _, set := doc["errorId"]; !set {
		doc["errorId"] = 0
	}
	writeJSON(w, status, doc)
}

// methodOf is the in.php method a kind is asked with.
func methodOf(k providers.Kind) string {
	switch {
	case k == providers.KindImage:
		return "base64"
	case k == providers.KindTurnstileChallenge:
		return string(providers.KindTurnstile)
	case strings.HasPrefix(string(k), "recaptcha"):
		return "userrecaptcha"
	}
	return string(k)
}

// ctCode spells an in.php answer as the createTask protocol does.
func ctCode(code string, f providers.Flavor) string {
	switch code {
	case ErrorWrongUserKey:
		return ErrorKeyDoesNotExist
	case ErrorWrongCaptchaID:
		if f == callback.CapSolver {
			return ErrorTaskIDInvalid
		}
		return ErrorNoSuchCaptchaID
	case ErrorCaptchaUnsolvable:
		if f == callback.CapSolver {
			return ErrorCaptchaSolveFaild
		}
	}
	return code
}

func (s *Simulator) handleGetTaskResult(w http.ResponseWriter, r *http.Request) {
	s.countResCall("get")
	req, bad := decodeCT(w, r, 64<<10)
	if bad != nil {
		s.writeCT(w, *bad, nil)
		return
	}
	if rp, ok := s.checkKey(req.ClientKey); !ok {
		s.writeCT(w, rp, nil)
		return
	}
	if rp, ok := s.admitResultFor(req.ClientKey); !ok {
		s.writeCT(w, rp, nil)
		return
	}
	rp, doc := s.taskResult(req.ClientKey, ctID(req.TaskID))
	s.writeCT(w, rp, doc)
}

// taskResult is getTaskResult's answer for one task.
func (s *Simulator) taskResult(key, id string) (reply, map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.lookup(key, id)
	if t == nil {
		return errReply(ErrorWrongCaptchaID), nil
	}
	t.resGets++
	switch s.statusAt(t, time.Now()) {
	case StatusSolving:
		return okReply(""), map[string]any{"status": "processing"}
	case StatusSolved:
		return okReply(""), map[string]any{"status": "ready", "solution": s.solutionFor(t)}
	case StatusUnsolvable:
		return errReply(ctCode(t.failWord(), s.profile.Flavor)), nil
	}
	return errReply(ErrorWrongCaptchaID), nil // expired
}

func (s *Simulator) handleGetBalance(w http.ResponseWriter, r *http.Request) {
	s.countResCall("getbalance")
	req, bad := decodeCT(w, r, 64<<10)
	if bad != nil {
		s.writeCT(w, *bad, nil)
		return
	}
	if rp, ok := s.checkKey(req.ClientKey); !ok {
		s.writeCT(w, rp, nil)
		return
	}
	s.writeCT(w, okReply(""), map[string]any{"balance": json.Number(strconv.FormatFloat(s.Balance(), 'f', -1, 64))})
}

// handleCTReport serves one of the flavor's report calls: the endpoint says the verdict, except CapSolver's
// feedbackTask, whose result.invalid does.
func (s *Simulator) handleCTReport(w http.ResponseWriter, r *http.Request, endpoint string) {
	req, bad := decodeCT(w, r, 64<<10)
	if bad != nil {
		s.writeCT(w, *bad, nil)
		return
	}
	good := false
	for _, rule := range s.profile.Reports {
		if rule.Endpoint == endpoint {
			good = rule.Good || (rule.Feedback && !req.Result.Invalid)
		}
	}
	s.countResCall(map[bool]string{true: "reportgood", false: "reportbad"}[good])
	if rp, ok := s.checkKey(req.ClientKey); !ok {
		s.writeCT(w, rp, nil)
		return
	}
	rp := s.report(req.ClientKey, ctID(req.TaskID), good)
	if rp.ok {
		s.writeCT(w, okReply(""), map[string]any{"status": "success"})
		return
	}
	s.writeCT(w, rp, nil)
}

// pingbackRequest is the task's callback: in.php's GET with id and code, or the flavor's createTask callback — a
// POST of the getTaskResult-shaped answer (callbackDoc), or 2captcha's form of id and code.
func (s *Simulator) pingbackRequest(t *task) (*http.Request, error) {
	if s.cfg.Protocol != ProtocolCreateTask {
		return http.NewRequestWithContext(s.ctx, http.MethodGet, pingbackTarget(t), nil)
	}
	var body []byte
	contentType := "application/json"
	if callback.FormBody(s.profile.Flavor) {
		code := CodeFor(t.idStr)
		if t.plan.unsolvable {
			code = t.failWord()
		}
		body, contentType = []byte(url.Values{"id": {t.idStr}, "code": {code}}.Encode()), "application/x-www-form-urlencoded"
	} else {
		body, _ = json.Marshal(s.callbackDoc(t))
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, t.pingbackURL, bytes.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", contentType)
	}
	return req, err
}

// callbackDoc is the getTaskResult-shaped callback body of a finished task. CapMonster's is its getTaskResult answer
// as is, which has no taskId ("identical to the response of the getTaskResult method":
// https://docs.capmonster.cloud/docs/api/methods/create-task); the others name the task.
func (s *Simulator) callbackDoc(t *task) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	doc := map[string]any{"errorId": 0, "taskId": s.idJSON(t.idStr), "status": "ready", "solution": s.solutionFor(t)}
	if t.plan.unsolvable {
		code := ctCode(t.failWord(), s.profile.Flavor)
		doc = map[string]any{"errorId": 1, "errorCode": code, "errorDescription": cmp.Or(errorTexts[code], "The task failed."),
			"taskId": s.idJSON(t.idStr), "status": "failed"}
	}
	if s.profile.Flavor == callback.CapMonster {
		delete(doc, "taskId")
	}
	return doc
}
