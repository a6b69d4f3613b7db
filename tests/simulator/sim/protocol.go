package sim

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Reply values of the in.php / res.php protocol, spelled as the real service
// spells them (including the historical CAPCHA typo).
const (
	ErrorWrongUserKey          = "ERROR_WRONG_USER_KEY"
	ErrorKeyDoesNotExist       = "ERROR_KEY_DOES_NOT_EXIST"
	ErrorZeroBalance           = "ERROR_ZERO_BALANCE"
	ErrorNoSlotAvailable       = "ERROR_NO_SLOT_AVAILABLE"
	ErrorNoSuchMethod          = "ERROR_NO_SUCH_METHOD"
	ErrorPageURL               = "ERROR_PAGEURL"
	ErrorGoogleKey             = "ERROR_GOOGLEKEY"
	ErrorBadParameters         = "ERROR_BAD_PARAMETERS"
	ErrorZeroCaptchaFilesize   = "ERROR_ZERO_CAPTCHA_FILESIZE"
	ErrorTooBigCaptchaFilesize = "ERROR_TOO_BIG_CAPTCHA_FILESIZE"
	ErrorWrongFileExtension    = "ERROR_WRONG_FILE_EXTENSION"
	ErrorUpload                = "ERROR_UPLOAD"
	ErrorCaptchaUnsolvable     = "ERROR_CAPTCHA_UNSOLVABLE"
	ErrorWrongCaptchaID        = "ERROR_WRONG_CAPTCHA_ID"
	CaptchaNotReady            = "CAPCHA_NOT_READY"
	// ErrorSimulatedUnknown is no real provider's code: the submit_error=unknown answer a client cannot know.
	ErrorSimulatedUnknown = "ERROR_SIMULATED_UNKNOWN"
	ReportRecorded        = "OK_REPORT_RECORDED"
	// ErrorDuplicateReport answers a second report on one task, as 2captcha documents.
	ErrorDuplicateReport = "ERROR_DUPLICATE_REPORT"
)

// errorTexts are the human-readable error_text values of JSON error replies.
var errorTexts = map[string]string{
	ErrorWrongUserKey:          "The key has an incorrect format; it must contain 32 characters.",
	ErrorKeyDoesNotExist:       "The key you provided does not exist.",
	ErrorZeroBalance:           "You don't have free threads.",
	ErrorNoSlotAvailable:       "No slot available; the queue of your tasks is too long, retry later.",
	ErrorNoSuchMethod:          "The method does not exist.",
	ErrorPageURL:               "The pageurl parameter is missing.",
	ErrorGoogleKey:             "The googlekey parameter is missing or malformed.",
	ErrorBadParameters:         "Required parameters are missing or have an incorrect format.",
	ErrorZeroCaptchaFilesize:   "Image size is less than 100 bytes.",
	ErrorTooBigCaptchaFilesize: "Image size is more than 1024 KB.",
	ErrorWrongFileExtension:    "Image file has an unsupported extension; accepted: jpg, jpeg, gif, png.",
	ErrorUpload:                "The server can't read the file data from your request.",
	ErrorCaptchaUnsolvable:     "The captcha could not be solved.",
	ErrorWrongCaptchaID:        "You provided an invalid or expired captcha id.",
	ErrorSimulatedUnknown:      "A simulated error no client knows (submit_error=unknown).",
	ErrorDuplicateReport:       "You have already reported this captcha.",
	ErrorTaskAbsent:            "The task property is missing in the createTask call.",
	ErrorTaskNotSupported:      "The task type is not supported by this provider.",
	MaxUserTurn:                "Too many submissions within the window; the account is barred for a while.",
	ErrorTooMuchRequests:       "Too many requests; slow down.",
	ErrorRateLimit:             "Request frequency/rate limit.",
}

// reply is one protocol answer.
type reply struct {
	ok bool
	// value is the task id, code, balance, or error/status code.
	value string
	// bare answers plain "value" instead of "OK|value" on success
	// (getbalance, report*).
	bare bool
	// detail extends error_text for parameter errors (e.g. which parameter).
	detail    string
	userAgent string // res.php's JSON useragent of a solved task whose kind answers one
	// fate holds, drops or replaces an in.php answer (the task exists): see holdAnswer and writeGatewayError.
	fate answerFate
}

func okReply(v string) reply     { return reply{ok: true, value: v} }
func bareOKReply(v string) reply { return reply{ok: true, value: v, bare: true} }
func errReply(code string) reply { return reply{value: code} }
func errReplyf(code, detail string) reply {
	return reply{value: code, detail: detail}
}

// protocolJSON is the json=1 document.
type protocolJSON struct {
	Status    int    `json:"status"`
	Request   string `json:"request"`
	ErrorText string `json:"error_text,omitempty"`
	UserAgent string `json:"useragent,omitempty"`
}

// wantsJSON reports whether the caller asked for json=1. It reads the parsed
// form when available and falls back to the query (for unparsable bodies).
func wantsJSON(r *http.Request) bool {
	if r.Form != nil {
		return r.Form.Get("json") == "1"
	}
	return r.URL.Query().Get("json") == "1"
}

// write answers with HTTP 200 — the protocol reports errors in the body.
func (rp reply) write(w http.ResponseWriter, asJSON bool) {
	w.Header().Set("Cache-Control", "no-store")
	if asJSON {
		doc := protocolJSON{Request: rp.value, UserAgent: rp.userAgent}
		if rp.ok {
			doc.Status = 1
		} else if strings.HasPrefix(rp.value, "ERROR_") {
			doc.ErrorText = errorTexts[rp.value]
			if rp.detail != "" {
				doc.ErrorText = strings.TrimSpace(doc.ErrorText + " " + rp.detail)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(doc)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	body := rp.value
	if rp.ok && !rp.bare {
		body = "OK|" + rp.value
	}
	_, _ = w.Write([]byte(body))
}
