package sim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// solve finishes t and starts its pingback according to its plan. It runs on
// the task's solve timer.
func (s *Simulator) solve(t *task) {
	s.mu.Lock()
	if !s.current(t) {
		s.mu.Unlock()
		return
	}
	t.solvedAt = time.Now()
	t.status = StatusSolved
	if t.plan.unsolvable {
		t.status = StatusUnsolvable
	}
	s.threads.release(t.key) // solved or found unsolvable: the thread is free
	plan := t.plan
	switch {
	case t.pingbackURL == "" || (plan.unsolvable && !plan.unsolvablePingback):
		s.mu.Unlock()
		return
	case plan.drop:
		t.attempts = append(t.attempts, PingbackAttempt{Kind: PingbackFirst, Outcome: OutcomeDropped, At: t.solvedAt})
		s.stats.pingbacks.Dropped++
		s.mu.Unlock()
		return
	case plan.late:
		// res.php already answers with the code; the pingback comes after the
		// workflow has given up waiting for it.
		s.schedule(t, s.cfg.LateDelay, func() { s.sendAll(t, PingbackLate, plan.duplicate) })
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()

	if plan.hang {
		s.hang(t)
		return
	}
	s.sendAll(t, PingbackFirst, plan.duplicate)
}

// sendAll sends the pingback, and a second time when duplicated.
func (s *Simulator) sendAll(t *task, kind PingbackKind, duplicate bool) {
	s.send(t, kind)
	if duplicate && s.sleep(s.cfg.DupGap) {
		s.send(t, PingbackDuplicate)
	}
}

// pingbackTarget is the task's pingback URL with id and code appended (the
// solution, or ERROR_CAPTCHA_UNSOLVABLE for an unsolvable task), keeping the
// URL's own query (e.g. ?t=token) intact.
func pingbackTarget(t *task) string {
	u, err := url.Parse(t.pingbackURL)
	if err != nil { // validated at submit; unreachable
		return t.pingbackURL
	}
	code := t.code()
	if t.plan.unsolvable { // only with unsolvablePingback does an unsolvable task get here
		code = t.failWord()
	}
	extra := url.Values{"id": {t.idStr}, "code": {code}}.Encode()
	if u.RawQuery == "" {
		u.RawQuery = extra
	} else {
		u.RawQuery += "&" + extra
	}
	return u.String()
}

// send makes one GET pingback. It is not retried: a lost pingback is exactly
// the real-world failure the workflow must survive.
func (s *Simulator) send(t *task, kind PingbackKind) {
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		return
	}
	defer func() { <-s.sem }()

	attempt, ok := s.deliver(t, kind)
	if !ok {
		return // shutting down; not a delivery outcome
	}
	s.recordPingback(t, attempt)
}

// deliver makes the pingback request and describes how it went; ok is false when shutdown interrupted it, which
// says nothing about the target.
func (s *Simulator) deliver(t *task, kind PingbackKind) (attempt PingbackAttempt, ok bool) {
	start := time.Now()
	attempt = PingbackAttempt{Kind: kind, At: start, Outcome: OutcomeFailed}
	req, err := s.pingbackRequest(t)
	if err == nil {
		req.Header.Set("User-Agent", "captchaflow-provider-simulator")
		var resp *http.Response
		if resp, err = s.client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
			attempt.HTTPStatus = resp.StatusCode
			if resp.StatusCode >= 200 && resp.StatusCode < 300 {
				attempt.Outcome = OutcomeSucceeded
			} else {
				attempt.Error = fmt.Sprintf("target answered HTTP %d", resp.StatusCode)
			}
		}
	}
	if err != nil {
		if s.ctx.Err() != nil {
			return attempt, false
		}
		attempt.Error = describeError(err)
	}
	attempt.DurationMS = time.Since(start).Milliseconds()
	return attempt, true
}

// recordPingback adds the attempt to a task still current and counts it in the pingback stats.
func (s *Simulator) recordPingback(t *task, attempt PingbackAttempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.current(t) {
		return
	}
	t.attempts = append(t.attempts, attempt)
	p := &s.stats.pingbacks
	p.Sent++
	if attempt.Outcome == OutcomeSucceeded {
		p.Succeeded++
	} else {
		p.Failed++
		s.log.Info("pingback failed", "task_id", t.idStr, "kind", attempt.Kind, "error", attempt.Error)
	}
	switch attempt.Kind {
	case PingbackDuplicate:
		p.Duplicated++
	case PingbackLate:
		p.Late++
	}
}

// describeError strips the URL (which may carry a callback token) from
// net/http's errors.
func describeError(err error) string {
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		err = uerr.Err
	}
	return err.Error()
}

// hang opens a connection to the pingback target, sends an incomplete request
// head and stalls until the target closes the connection (its read timeout
// fired) or HangFor passes. The code never arrives this way.
func (s *Simulator) hang(t *task) {
	start := time.Now()
	attempt := PingbackAttempt{Kind: PingbackHang, At: start, Outcome: OutcomeHung}
	closedByTarget, err := s.stall(t.pingbackURL)
	if err != nil && s.ctx.Err() != nil {
		return
	}
	attempt.TargetClosed = closedByTarget
	switch {
	case err != nil:
		attempt.Error = describeError(err)
	case closedByTarget:
		attempt.Error = "target closed the stalled connection"
	default:
		attempt.Error = "stalled connection held for " + s.cfg.HangFor.String()
	}
	attempt.DurationMS = time.Since(start).Milliseconds()

	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.current(t) {
		return
	}
	t.attempts = append(t.attempts, attempt)
	s.stats.pingbacks.Hung++
}

// stall does the network part of hang. closedByTarget is true when the peer
// ended the connection before HangFor.
func (s *Simulator) stall(rawURL string) (closedByTarget bool, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false, err
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	dialCtx, cancelDial := context.WithTimeout(s.ctx, s.cfg.PingbackTimeout)
	defer cancelDial()
	var conn net.Conn
	conn, err = (&net.Dialer{}).DialContext(dialCtx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return false, err
	}
	if u.Scheme == "https" {
		tlsConn := tls.Client(conn, &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
		if err = tlsConn.HandshakeContext(dialCtx); err != nil {
			_ = conn.Close()
			return false, err
		}
		conn = tlsConn
	}
	defer conn.Close()
	stop := context.AfterFunc(s.ctx, func() { _ = conn.Close() })
	defer stop()

	// The request line and Host header, but never the blank line that ends
	// the head: the server keeps waiting for the rest.
	partial := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: captchaflow-provider-simulator\r\n", u.RequestURI(), u.Host)
	if err = conn.SetDeadline(time.Now().Add(s.cfg.HangFor)); err != nil {
		return false, err
	}
	if _, err = io.WriteString(conn, partial); err != nil {
		return false, err
	}
	// Whatever the target sends back (nothing, a 408, EOF) ends the stall
	// once it closes; only the deadline means it never gave up.
	_, err = io.Copy(io.Discard, conn)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return false, nil
	}
	if s.ctx.Err() != nil {
		return false, s.ctx.Err()
	}
	return true, nil
}
