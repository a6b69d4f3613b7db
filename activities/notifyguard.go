package activities

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// notify_url is chosen by whoever starts a task, and the worker sits in a private network next to metadata
// endpoints and admin UIs: deliveries go only to public addresses, checked on the address connected to (after DNS),
// no redirects followed, and the receiver's answer reaches history only as a short sanitised excerpt.

// FailureDeliveryForbidden: notify_url is not http(s) or points where deliveries may not go; not retried.
const FailureDeliveryForbidden = "DeliveryForbidden"

// ErrForbiddenTarget marks a notify_url the worker refuses to connect to.
var ErrForbiddenTarget = errors.New("forbidden notify_url target")

// forbiddenAddrError is returned by the dialer's Control hook; it names the address, never the URL.
type forbiddenAddrError struct {
	addr    netip.Addr
	reason  string
	private bool // NOTIFY_ALLOW_PRIVATE would admit it
}

func (e *forbiddenAddrError) Error() string {
	return fmt.Sprintf("%s is a %s address", e.addr, e.reason)
}

func (e *forbiddenAddrError) Unwrap() error { return ErrForbiddenTarget }

// forbiddenURLError refuses a notify_url before any connection: no setting admits it.
type forbiddenURLError struct{ msg string }

func (e *forbiddenURLError) Error() string { return e.msg }
func (e *forbiddenURLError) Unwrap() error { return ErrForbiddenTarget }

// privateAddr builds the refusal of an address NOTIFY_ALLOW_PRIVATE admits.
func privateAddr(addr netip.Addr, reason string) error {
	return &forbiddenAddrError{addr: addr, reason: reason, private: true}
}

// Non-public IPv4 ranges that netip's predicates do not cover.
var extraForbiddenV4 = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\""},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (shared)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // includes 255.255.255.255
}

// Non-public IPv6 ranges that netip's predicates do not cover, and the two that embed an IPv4 address.
var (
	extraForbiddenV6 = []struct {
		prefix netip.Prefix
		reason string
	}{
		{netip.MustParsePrefix("::/96"), "IPv4-compatible (deprecated)"},
		{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
		{netip.MustParsePrefix("100::/64"), "discard-only"},
		{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
		{netip.MustParsePrefix("fec0::/10"), "site-local"},
	}
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// checkTarget decides whether a delivery may connect to addr. allowPrivate (NOTIFY_ALLOW_PRIVATE) admits the
// non-public unicast ranges; link-local (cloud metadata), unspecified and multicast are refused even then.
func checkTarget(addr netip.Addr, allowPrivate bool) error {
	if !addr.IsValid() {
		return &forbiddenAddrError{addr: addr, reason: "invalid"}
	}
	addr = addr.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	switch {
	case addr.IsUnspecified():
		return &forbiddenAddrError{addr: addr, reason: "unspecified"}
	case addr.IsMulticast(), addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast():
		return &forbiddenAddrError{addr: addr, reason: "multicast"}
	case addr.IsLinkLocalUnicast():
		return &forbiddenAddrError{addr: addr, reason: "link-local"}
	}
	if allowPrivate {
		return nil
	}
	switch {
	case addr.IsLoopback():
		return privateAddr(addr, "loopback")
	case addr.IsPrivate():
		return privateAddr(addr, "private")
	}
	if addr.Is4() {
		for _, r := range extraForbiddenV4 {
			if r.prefix.Contains(addr) {
				return privateAddr(addr, r.reason)
			}
		}
		return nil
	}
	for _, r := range extraForbiddenV6 {
		if r.prefix.Contains(addr) {
			return privateAddr(addr, r.reason)
		}
	}
	// NAT64 and 6to4 addresses reach the IPv4 address they embed: judge that one.
	b := addr.As16()
	switch {
	case nat64Prefix.Contains(addr):
		return checkEmbedded(addr, netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	case sixToFour.Contains(addr):
		return checkEmbedded(addr, netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	}
	return nil
}

func checkEmbedded(outer, inner netip.Addr) error {
	if err := checkTarget(inner, false); err != nil {
		var fe *forbiddenAddrError
		errors.As(err, &fe)
		return &forbiddenAddrError{addr: outer, reason: fe.reason + " (embedded " + inner.String() + ")", private: fe.private}
	}
	return nil
}

// checkNotifyURL refuses what no connection check can: a scheme other than http or https, or no host.
func checkNotifyURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &forbiddenURLError{"not a valid URL"}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return &forbiddenURLError{fmt.Sprintf("scheme %q is not http or https", u.Scheme)}
	}
	if u.Hostname() == "" {
		return &forbiddenURLError{"no host"}
	}
	return nil
}

// NewDeliveryClient is the client deliveries are POSTed with: connections only where checkTarget allows (at
// connect time, so DNS cannot sneak past it), no redirects, and no proxy (the check must see the real target).
func NewDeliveryClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &forbiddenURLError{fmt.Sprintf("cannot parse dial address %q", address)}
			}
			return checkTarget(ap.Addr(), allowPrivate)
		},
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// maxExcerpt bounds how much of a receiver's answer reaches the activity error (history, Web UI).
const maxExcerpt = 64

// excerpt keeps at most maxExcerpt bytes of printable ASCII from b, anything else collapsed to one space.
func excerpt(b []byte) string {
	out := make([]byte, 0, maxExcerpt)
	space := false
	for _, c := range b {
		if c > ' ' && c < 0x7f {
			if space && len(out) > 0 {
				out = append(out, ' ')
			}
			space = false
			out = append(out, c)
		} else {
			space = true
		}
		if len(out) >= maxExcerpt {
			return string(out[:maxExcerpt]) + "..."
		}
	}
	return string(out)
}

// describeDeliveryError drops the URL (it may carry the receiver's credentials or token) from net/http's errors.
func describeDeliveryError(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return err.Error()
}
