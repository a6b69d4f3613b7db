package sim

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
)

// funCaptchaTail is what a FunCaptcha token carries after its session, as Arkose Labs' tokens do: fields joined by
// "|", so an in.php answer of one holds several.
const funCaptchaTail = "|r=eu-west-1|meta=3|lang=en|pk=sim|at=40|cdn_url=https%3A%2F%2Fclient-api.arkoselabs.com%2Fcdn%2Ffc"

// CodeFor is the solution the simulator hands out for a task id. It depends
// only on the id, so a test can check that the right code reached the right
// place without asking the simulator.
func CodeFor(taskID string) string {
	sum := sha256.Sum256([]byte("captchaflow-sim:" + taskID))
	return "CODE-" + taskID + "-" + hex.EncodeToString(sum[:4])
}

// AnswerFor is the solution of an in.php task of method: CodeFor(taskID), and for FunCaptcha a token holding "|".
func AnswerFor(taskID, method string) string {
	if method == "funcaptcha" {
		return CodeFor(taskID) + funCaptchaTail
	} else if method == "datadome" { // 2captcha answers the cookie as a Set-Cookie line
		return "datadome=" + CodeFor(taskID) + "; Max-Age=31536000; Domain=.site.example; Path=/; Secure; SameSite=Lax"
	}
	return CodeFor(taskID)
}

// code is t's solution as its protocol answers it (createTask's solution objects carry CodeFor in every field).
func (t *task) code() string {
	if t.taskType != "" {
		return CodeFor(t.idStr)
	}
	return AnswerFor(t.idStr, t.method)
}

// SimUserAgent is the user agent a task of a kind that answers one is solved with, when it named none.
const SimUserAgent = "Mozilla/5.0 (X11; Linux x86_64) captchaflow-sim"

// answerAgent is the user agent t answers with ("": its kind answers none): the one it named, as providers echo it.
func (t *task) answerAgent() string {
	if !t.kind.AnswersMore() {
		return ""
	}
	return cmp.Or(t.userAgent, SimUserAgent)
}
