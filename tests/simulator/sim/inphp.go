package sim

import (
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
)

const (
	// maxRequestBytes caps an in.php request body (the largest image plus form overhead).
	maxRequestBytes = 2 << 20
	// minImageBytes and maxImageBytes are the real service's image size limits.
	minImageBytes = 100
	maxImageBytes = 1 << 20
)

// handleIn serves in.php (GET or POST; urlencoded or multipart).
func (s *Simulator) handleIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	rp := s.submit(r)
	if r.MultipartForm != nil {
		_ = r.MultipartForm.RemoveAll()
	}
	s.holdAnswer(r, rp) // submit_stall_ms, submit_lost: may not return
	if writeGatewayError(w, rp) {
		return
	}
	rp.write(w, wantsJSON(r))
}

// submit validates one in.php request and, if acceptable, creates a task.
func (s *Simulator) submit(r *http.Request) reply {
	if err := parseForm(r); err != nil {
		if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
			return s.reject(errReply(ErrorTooBigCaptchaFilesize))
		}
		return s.reject(errReply(ErrorUpload))
	}
	if rp, ok := s.checkKey(r.Form.Get("key")); !ok {
		return s.reject(rp)
	}
	if rp, ok := s.admitSubmitFor(r.Form.Get("key")); !ok {
		return rp
	}
	method := r.Form.Get("method")
	if slices.Contains(s.cfg.Refuse, method) {
		return s.reject(errReplyf(ErrorNoSuchMethod, "method="+method+" is not offered (SIM_REFUSE)."))
	}
	if rp, ok := checkMethodParams(r, method); !ok {
		return s.reject(rp)
	}
	pingback, rp, ok := parsePingback(r.Form.Get("pingback"))
	if !ok {
		return s.reject(rp)
	}
	proxy, ok := parseInPHPProxy(r.Form.Get("proxy"), r.Form.Get("proxytype"))
	if !ok {
		return s.reject(errReplyf(ErrorBadProxy, "proxy is not login:password@host:port or host:port."))
	}
	faults, err := ParseFaultSpec(r.Form.Get("sim_fault"))
	if err != nil {
		return s.reject(errReplyf(ErrorBadParameters, "sim_fault: "+err.Error()))
	}
	var solveOverride *time.Duration
	if v := r.Form.Get("sim_solve_ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			return s.reject(errReplyf(ErrorBadParameters, "sim_solve_ms must be a non-negative integer"))
		}
		d := time.Duration(ms) * time.Millisecond
		solveOverride = &d
	}
	if proxy == nil && slices.Contains(captchaflow.ProxiedMethods, method) { // as 2captcha: the method goes through a proxy only
		return s.reject(errReplyf(ErrorBadParameters, "method="+method+" needs proxy."))
	}
	return s.accept(submission{key: r.Form.Get("key"), method: method, pingback: pingback, faults: faults, solveOverride: solveOverride,
		proxy: proxy, userAgent: r.Form.Get("userAgent"), kind: providers.AnswersMore(method, map[string]string{"pagedata": r.Form.Get("pagedata")})})
}

func parseForm(r *http.Request) error {
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType == "multipart/form-data" {
		return r.ParseMultipartForm(maxRequestBytes)
	}
	return r.ParseForm()
}

// checkKey applies the real service's two key errors.
func (s *Simulator) checkKey(key string) (reply, bool) {
	if len(key) != KeyLength {
		return errReply(ErrorWrongUserKey), false
	}
	if _, ok := s.keys[key]; !ok {
		return errReply(ErrorKeyDoesNotExist), false
	}
	return reply{}, true
}

// checkMethodParams checks the method and the parameters it requires: the image methods by their upload, the
// others by captchaflow.RequiredParams, the same table the workflow validates its input with.
func checkMethodParams(r *http.Request, method string) (reply, bool) {
	switch method {
	case "base64":
		return checkBase64Image(r.Form.Get("body"))
	case "post":
		return checkFileImage(r)
	}
	required, known := captchaflow.Required(method)
	if !known {
		return errReply(ErrorNoSuchMethod), false
	}
	for _, param := range required {
		if strings.TrimSpace(r.Form.Get(param)) == "" {
			return errReplyf(missingParamError(param), param+" is required for method="+method+"."), false
		}
	}
	return reply{}, true
}

// missingParamError is the code a provider answers for a missing required field: reCAPTCHA's key and the page
// URL have codes of their own, the rest are bad parameters.
func missingParamError(param string) string {
	switch param {
	case "googlekey":
		return ErrorGoogleKey
	case "pageurl":
		return ErrorPageURL
	}
	return ErrorBadParameters
}

func checkBase64Image(body string) (reply, bool) {
	body = strings.TrimSpace(body)
	if body == "" {
		return errReply(ErrorZeroCaptchaFilesize), false
	}
	img, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		if img, err = base64.RawStdEncoding.DecodeString(body); err != nil {
			return errReply(ErrorUpload), false
		}
	}
	return checkImageSize(int64(len(img)))
}

func checkFileImage(r *http.Request) (reply, bool) {
	if r.MultipartForm == nil || len(r.MultipartForm.File["file"]) == 0 {
		return errReplyf(ErrorZeroCaptchaFilesize, "method=post needs a multipart file field named file."), false
	}
	fh := r.MultipartForm.File["file"][0]
	switch strings.ToLower(path.Ext(fh.Filename)) {
	case ".jpg", ".jpeg", ".gif", ".png":
	default:
		return errReply(ErrorWrongFileExtension), false
	}
	return checkImageSize(fh.Size)
}

func checkImageSize(n int64) (reply, bool) {
	switch {
	case n < minImageBytes:
		return errReply(ErrorZeroCaptchaFilesize), false
	case n > maxImageBytes:
		return errReply(ErrorTooBigCaptchaFilesize), false
	}
	return reply{}, true
}

// parsePingback accepts an empty value (no pingback) or an absolute http(s) URL.
func parsePingback(raw string) (*url.URL, reply, bool) {
	if raw == "" {
		return nil, reply{}, true
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errReplyf(ErrorBadParameters, "pingback must be an absolute http(s) URL."), false
	}
	return u, reply{}, true
}

// reject counts a refused submission.
func (s *Simulator) reject(rp reply) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectLocked(rp.value)
	return rp
}

func (s *Simulator) rejectLocked(code string) {
	s.stats.rejected++
	s.stats.rejectedByCode[code]++
}

// clientTaskKey identifies the client's task behind a pingback URL: its path (the workflow), without the query
// that names one submission, so "the first N submissions" counts a task's submissions, not its URLs.
func clientTaskKey(pingback *url.URL) string {
	if pingback == nil {
		return ""
	}
	return pingback.Scheme + "://" + pingback.Host + pingback.EscapedPath()
}

// submission is one accepted-for-checking request of either protocol.
type submission struct {
	key, method   string
	taskType      string // createTask only
	kind          providers.Kind
	pingback      *url.URL
	faults        FaultSpec
	solveOverride *time.Duration
	proxy         *ProxyGot
	userAgent     string
}

// accept applies submit-time faults and the thread limit, then creates and
// schedules the task.
func (s *Simulator) accept(sub submission) reply {
	pingbackURL := ""
	if sub.pingback != nil {
		pingbackURL = sub.pingback.String()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	faults := sub.faults.merge(matchRules(s.compiledRules, pingbackURL))
	client := clientTaskKey(sub.pingback)
	if rp, ok := s.admitLocked(faults, client, sub.key); !ok {
		return rp
	}

	id := s.nextID
	s.nextID++
	idStr := s.formatID(id)
	faults = faults.merge(matchRules(s.compiledRules, idStr))
	solve, unsolvableDraw, pingbackDraw := s.draw(id)
	if sub.solveOverride != nil {
		solve = *sub.solveOverride
	}

	t := s.newTask(sub, id, idStr, solve, s.planLocked(faults, client, unsolvableDraw, pingbackDraw))
	if s.badProxy(sub.proxy) { // created (and paid), then the provider's proxy check fails
		t.plan = pingbackPlan{unsolvable: true, unsolvablePingback: true, failWord: s.proxyWord()}
	}
	fate := s.answerFateLocked(faults, client)
	t.plan.submitLost, t.plan.submitStall, t.plan.submitGatewayStatus = fate.lost, fate.stall, fate.gatewayStatus
	s.tasks[id] = t
	s.stats.accepted++
	s.schedule(t, solve, func() { s.solve(t) })
	s.log.Debug("task accepted", "task_id", idStr, "method", sub.method, "solve_time", solve, "faults", t.plan.names())
	rp := okReply(idStr)
	rp.fate = fate
	return rp
}

// admitLocked refuses a submission the way the real service would: shutting down, a scripted submit failure, an
// empty balance or no free thread for the key, in that order. Callers hold s.mu.
func (s *Simulator) admitLocked(faults FaultSpec, client, key string) (reply, bool) {
	if s.closed {
		s.rejectLocked(ErrorNoSlotAvailable)
		return errReplyf(ErrorNoSlotAvailable, "The simulator is shutting down."), false
	}
	if faults.FailSubmit > s.failSubmitSeen[client] {
		s.failSubmitSeen[client]++
		code := faults.submitErrorCode()
		s.rejectLocked(code)
		return errReply(code), false
	}
	if s.balance <= 0 {
		s.rejectLocked(ErrorZeroBalance)
		return errReplyf(ErrorZeroBalance, "Your account balance is zero."), false
	}
	if !s.threads.take(key) {
		s.rejectLocked(s.cfg.BusyCode)
		return errReply(s.cfg.BusyCode), false
	}
	return reply{}, true
}

// draw returns task id's solve time and its two fate draws. Every draw comes from a generator seeded by (seed, id),
// in a fixed order, so a task's fate does not depend on how concurrent submissions interleave.
func (s *Simulator) draw(id int64) (solve time.Duration, unsolvableDraw, pingbackDraw float64) {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, uint64(id)))
	solve = s.cfg.SolveMin
	if spread := s.cfg.SolveMax - s.cfg.SolveMin; spread > 0 {
		solve += time.Duration(rng.Int64N(int64(spread) + 1))
	}
	return solve, rng.Float64(), rng.Float64()
}

// planLocked decides what happens to the task's pingback: the configured rates by the draws, or the explicit
// faults when any are set. Callers hold s.mu.
func (s *Simulator) planLocked(faults FaultSpec, client string, unsolvableDraw, pingbackDraw float64) pingbackPlan {
	if faults.IsZero() {
		return drawPlan(&s.cfg, unsolvableDraw, pingbackDraw)
	}
	if faults.Unsolvable > s.unsolvableSeen[client] {
		s.unsolvableSeen[client]++
		return pingbackPlan{unsolvable: true, unsolvablePingback: faults.UnsolvablePingback || s.cfg.UnsolvablePingback}
	}
	return pingbackPlan{
		drop:      faults.DropPingback,
		hang:      faults.HangPingback,
		late:      faults.LatePingback,
		duplicate: faults.DuplicatePingback,
	}
}

// newTask builds the task record of an accepted submission.
func (s *Simulator) newTask(sub submission, id int64, idStr string, solve time.Duration, plan pingbackPlan) *task {
	t := &task{
		gen:         s.gen,
		id:          id,
		idStr:       idStr,
		key:         sub.key,
		method:      sub.method,
		taskType:    sub.taskType,
		kind:        sub.kind,
		submittedAt: time.Now(),
		solveTime:   solve,
		plan:        plan,
		status:      StatusSolving,
		proxy:       sub.proxy,
		userAgent:   sub.userAgent,
	}
	if sub.pingback != nil {
		t.pingbackURL = sub.pingback.String()
		t.redactedURL, t.pingbackPath = redactURL(sub.pingback), sub.pingback.Path
	}
	return t
}

// redactURL hides query values (a callback token) and userinfo.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.Fragment = ""
	q := c.Query()
	for k := range q {
		q[k] = []string{"REDACTED"}
	}
	c.RawQuery = q.Encode()
	return c.String()
}
