package sim

import (
	"cmp"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// Proxies: the simulator records the proxy and user agent each task came with, refuses a createTask proxied type
// that carries no proxy (ERROR_PROXY_MISSING), and answers a task whose proxy host is in SIM_BAD_PROXIES with the
// protocol's proxy word once created: in.php's ERROR_PROXY_CONNECTION_FAILED, each createTask flavor's own.

// ErrorProxyMissing answers a proxied task type sent without a proxy; ErrorBadProxy an in.php proxy it cannot read.
const (
	ErrorProxyMissing          = "ERROR_PROXY_MISSING"
	ErrorBadProxy              = "ERROR_BAD_PROXY"
	ErrorProxyConnectionFailed = "ERROR_PROXY_CONNECTION_FAILED"
)

// proxyWords are the words a createTask flavor ends a task with when it cannot use its proxy.
var proxyWords = map[callback.Flavor]string{callback.AntiCaptcha: "ERROR_PROXY_CONNECT_REFUSED",
	callback.TwoCaptcha: ErrorProxyConnectionFailed, callback.CapMonster: "ERROR_PROXY_NOT_AUTHORISED", callback.CapSolver: "ERROR_PROXY_BANNED"}

// ProxyGot is the proxy a task came with, its password only said to be there.
type ProxyGot struct {
	Type     string `json:"type,omitempty"`
	Address  string `json:"address"`
	Port     int    `json:"port"`
	Login    string `json:"login,omitempty"`
	Password bool   `json:"password,omitempty"`
}

// parseInPHPProxy reads in.php's proxy (login:password@host:port or host:port) and proxytype; nil with ok: none.
func parseInPHPProxy(proxy, typ string) (got *ProxyGot, ok bool) {
	if proxy == "" {
		return nil, true
	}
	got = &ProxyGot{Type: typ}
	if i := strings.LastIndex(proxy, "@"); i >= 0 {
		login, password, _ := strings.Cut(proxy[:i], ":")
		got.Login, got.Password, proxy = login, password != "", proxy[i+1:]
	}
	host, port, err := net.SplitHostPort(proxy)
	got.Address = host
	got.Port, _ = strconv.Atoi(port)
	return got, err == nil && host != "" && got.Port > 0
}

// ctProxy reads a createTask task's proxy fields; nil: none.
func ctProxy(task map[string]any) *ProxyGot {
	addr, _ := task["proxyAddress"].(string)
	if addr == "" {
		return nil
	}
	port, _ := strconv.Atoi(fmt.Sprint(task["proxyPort"])) // a json.Number: decodeCT uses UseNumber
	typ, _ := task["proxyType"].(string)
	login, _ := task["proxyLogin"].(string)
	password, _ := task["proxyPassword"].(string)
	return &ProxyGot{Type: typ, Address: addr, Port: port, Login: login, Password: password != ""}
}

// proxyWord is the word this simulator ends a task with whose proxy it cannot use.
func (s *Simulator) proxyWord() string {
	if s.cfg.Protocol != ProtocolCreateTask {
		return ErrorProxyConnectionFailed
	}
	return cmp.Or(proxyWords[s.profile.Flavor], ErrorProxyConnectionFailed)
}

// badProxy tells whether got names a proxy SIM_BAD_PROXIES lists.
func (s *Simulator) badProxy(got *ProxyGot) bool {
	if got == nil {
		return false
	}
	for _, h := range s.cfg.BadProxies {
		if strings.EqualFold(strings.TrimSpace(h), got.Address) {
			return true
		}
	}
	return false
}
