package activities

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// notify_url is chosen by whoever starts a task, and the worker sits in a private network next to metadata
// endpoints and admin UIs: deliveries go only to public addresses, checked on the address connected to (after DNS),
// no redirects followed, and the receiver's answer reaches history only as a short sanitised excerpt.

// FailureDeliveryForbidden: notify_url is not http(s) or points where deliveries may not go; not retried.
const FailureDeliveryForbidden = "DeliveryForbidden"

// errForbiddenTarget marks an address the worker refuses to connect to; its errors name the address, never the URL.
var errForbiddenTarget = errors.New("forbidden target")

// reservedRanges are the non-public ranges netip's predicates do not cover (255.255.255.255 is in 240.0.0.0/4).
var reservedRanges = func() (out []netip.Prefix) {
	for _, p := range strings.Fields(`0.0.0.0/8 100.64.0.0/10 192.0.0.0/24 192.0.2.0/24 198.18.0.0/15 198.51.100.0/24
		203.0.113.0/24 240.0.0.0/4 ::/96 64:ff9b:1::/48 100::/64 2001:db8::/32 fec0::/10`) {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}()

// NAT64 and 6to4 addresses reach the IPv4 address they embed (at these byte offsets).
var nat64, sixToFour = netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("2002::/16")

// admitted ends the refusal of an address NOTIFY_ALLOW_PRIVATE admits.
const admitted = " (deliveries go to public addresses only; NOTIFY_ALLOW_PRIVATE=true on the worker admits private ones)"

func refuse(addr netip.Addr, reason, hint string) error {
	return fmt.Errorf("%w: %s is a %s address%s", errForbiddenTarget, addr, reason, hint)
}

// checkTarget decides whether a delivery may connect to addr. allowPrivate (NOTIFY_ALLOW_PRIVATE) admits the
// non-public unicast ranges; link-local (cloud metadata), unspecified and multicast are refused even then.
func checkTarget(addr netip.Addr, allowPrivate bool) error {
	addr = addr.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	switch {
	case !addr.IsValid(), addr.IsUnspecified():
		return refuse(addr, "unspecified", "")
	case addr.IsMulticast():
		return refuse(addr, "multicast", "")
	case addr.IsLinkLocalUnicast():
		return refuse(addr, "link-local", "")
	case allowPrivate:
		return nil
	case addr.IsLoopback():
		return refuse(addr, "loopback", admitted)
	case addr.IsPrivate():
		return refuse(addr, "private", admitted)
	}
	for _, p := range reservedRanges {
		if p.Contains(addr) {
			return refuse(addr, "reserved", admitted)
		}
	}
	b := addr.As16()
	inner, embeds := netip.AddrFrom4([4]byte(b[12:16])), nat64.Contains(addr)
	if sixToFour.Contains(addr) {
		inner, embeds = netip.AddrFrom4([4]byte(b[2:6])), true
	}
	if !embeds {
		return nil
	} else if err := checkTarget(inner, false); err != nil {
		return fmt.Errorf("%s embeds %s: %w", addr, inner, err)
	}
	return nil
}

// newDeliveryClient is the client deliveries are POSTed with: connections only where checkTarget allows (at
// connect time, so DNS cannot sneak past it), no redirects, and no proxy (the check must see the real target).
func newDeliveryClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot parse dial address %q", errForbiddenTarget, address)
			}
			return checkTarget(ap.Addr(), allowPrivate)
		}}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy, transport.DialContext = nil, dialer.DialContext
	return &http.Client{Transport: transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// maxExcerpt bounds how much of a receiver's answer reaches the activity error (history, Web UI).
const maxExcerpt = 64

// excerpt keeps at most maxExcerpt bytes of printable ASCII from b, anything else collapsed to one space.
func excerpt(b []byte) string {
	s := strings.Join(strings.FieldsFunc(string(b), func(r rune) bool { return r <= ' ' || r >= 0x7f }), " ")
	if len(s) > maxExcerpt {
		return s[:maxExcerpt] + "..."
	}
	return s
}

// describeDeliveryError drops the URL (it may carry the receiver's credentials or token) from net/http's errors.
func describeDeliveryError(err error) string {
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		err = uerr.Err
	}
	return err.Error()
}
