package captchaflow

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Proxy is params.proxy read: in.php's login:password@host:port or host:port.
type Proxy struct {
	Login, Password, Host string
	Port                  int
}

// ProxyTypes are params.proxytype's values, as in.php takes them.
var ProxyTypes = []string{"HTTP", "HTTPS", "SOCKS4", "SOCKS5"}

var errProxyForm = errors.New("must be login:password@host:port or host:port (port 1-65535)")

// ParseProxy reads params.proxy without DNS; no error holds the password (nor the login).
func ParseProxy(s string) (Proxy, error) {
	var p Proxy
	hostPort := s
	if i := strings.LastIndex(s, "@"); i >= 0 { // a password may hold "@"; a host never does
		var ok bool
		if p.Login, p.Password, ok = strings.Cut(s[:i], ":"); !ok || p.Login == "" || p.Password == "" {
			return Proxy{}, errProxyForm
		}
		hostPort = s[i+1:]
	}
	host, port, err := net.SplitHostPort(hostPort)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 1 || n > 65535 || host == "" {
		return Proxy{}, errProxyForm
	}
	p.Host, p.Port = host, n
	ip, err := netip.ParseAddr(host)
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	switch {
	case err != nil && (strings.Trim(strings.ToLower(host), "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" || strings.EqualFold(host, "localhost")):
		return Proxy{}, fmt.Errorf("host %.64q is neither an IP address nor a public host name", host)
	case err == nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast()):
		return Proxy{}, fmt.Errorf("host %s is a loopback, private, link-local or unspecified address: no provider can reach it", host)
	}
	return p, nil
}

// checkProxy: a proxy captchaflow can hand on, with its type; a type without a proxy is a mistake.
func (in Input) checkProxy() error {
	proxy, hasProxy := in.Params["proxy"]
	typ, hasType := in.Params["proxytype"]
	if !hasProxy {
		if hasType {
			return fieldError("params.proxytype", "only with params.proxy")
		} else if slices.Contains(ProxiedMethods, in.Method) {
			return fieldError("params.proxy", "required for method %s: its providers solve it through the user's proxy only", in.Method)
		}
		return nil
	}
	if _, err := ParseProxy(proxy); err != nil {
		return fieldError("params.proxy", "%v", err)
	}
	if !slices.Contains(ProxyTypes, strings.ToUpper(strings.TrimSpace(typ))) {
		return fieldError("params.proxytype", "%.10q must be one of %s with params.proxy", typ, strings.Join(ProxyTypes, ", "))
	}
	return nil
}
