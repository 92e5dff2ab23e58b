//go:build queueset_oracle

// This file is ours (kube-apf-proxy), not Kubernetes': scripts/queueset-differential.sh adds it
// to k8s.io/apiserver's fairqueuing/queueset package at build time (go build -overlay), so that
// it can drive the package's queue set through its internal hooks. Nothing of Kubernetes is
// copied.
//
// It reads a scenario (JSON; see readScenario) and replays it on the package's fake event clock,
// one goroutine, in a fixed order within each instant:
//  1. requests still waiting whose wait limit or context deadline is due leave their queue
//     (the apiserver's path when the context ends: decision cancel, then wait());
//  2. the clock moves (testing/eventclock's SetTime), running the queue set's own events:
//     final seats released after their additional latency;
//  3. executions that end now finish (finishRequestAndDispatchAsMuchAsPossible), by request index;
//  4. requests that arrive now start (StartRequest), by request index.
//
// It prints one JSON object: per request its outcome, dispatch instant and order, or rejection
// instant and reason.

package queueset

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"time"

	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	"k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/promise"
	testeventclock "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/testing/eventclock"
	"k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
)

// OracleMain runs the oracle: `oracle SCENARIO` (`-` for standard input). Exit 0 with the
// outcomes on out, 2 with one line on errOut when the scenario cannot be read or is malformed.
func OracleMain(args []string, out, errOut io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(errOut, "usage: queueset-oracle SCENARIO.json (- for standard input)")
		return 2
	}
	var data []byte
	var err error
	if args[0] == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(args[0])
	}
	if err != nil {
		fmt.Fprintf(errOut, "queueset-oracle: %v\n", err)
		return 2
	}
	sc, err := readScenario(data)
	if err != nil {
		fmt.Fprintf(errOut, "queueset-oracle: scenario: %v\n", err)
		return 2
	}
	outcomes, err := runScenario(sc)
	if err != nil {
		fmt.Fprintf(errOut, "queueset-oracle: %v\n", err)
		return 2
	}
	enc, err := json.Marshal(oracleOutput{Requests: outcomes})
	if err != nil {
		fmt.Fprintf(errOut, "queueset-oracle: %v\n", err)
		return 2
	}
	fmt.Fprintln(out, string(enc))
	return 0
}

// The largest instant or duration accepted (about 11.5 days): sums stay far from overflow.
const oracleMaxNs = int64(1_000_000_000_000_000)

// The most seats a request may ask for.
const oracleMaxSeats = int64(1_000_000)

type oracleConfig struct {
	queues, handSize, queueLengthLimit, concurrencyLimit int
	// Zero: no wait limit.
	requestWaitLimitNs int64
}

type oracleRequest struct {
	arrivalNs, additionalLatencyNs, executionNs int64
	flowHash                                    uint64
	initialSeats, finalSeats                    uint64
	// -1: none.
	deadlineNs int64
}

type oracleScenarioFile struct {
	config   oracleConfig
	requests []oracleRequest
}

// One request's outcome. Instants are nanoseconds from the scenario's start.
type oracleOutcome struct {
	Outcome string `json:"outcome"` // dispatched | rejected
	// dispatched: when, in which position among all dispatches (0-based), when it finished.
	DispatchedAtNs *int64 `json:"dispatchedAtNs,omitempty"`
	DispatchSeq    *int   `json:"dispatchSeq,omitempty"`
	FinishedAtNs   *int64 `json:"finishedAtNs,omitempty"`
	// rejected: queue-full, time-out (its wait limit) or cancelled (its context deadline).
	Reason       string `json:"reason,omitempty"`
	RejectedAtNs *int64 `json:"rejectedAtNs,omitempty"`
}

type oracleOutput struct {
	Requests []oracleOutcome `json:"requests"`
}

// --- reading ---

type fieldError struct {
	path, msg string
}

func (e fieldError) Error() string { return e.path + ": " + e.msg }

func readObject(raw json.RawMessage, path string, allowed []string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fieldError{path, "not a JSON object"}
	}
	known := map[string]bool{}
	for _, k := range allowed {
		known[k] = true
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !known[k] {
			return nil, fieldError{join(path, k), "unknown field"}
		}
	}
	return m, nil
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// readInt reads m[field], an integer in [lo, hi]; absent gives def, or an error when required.
func readInt(m map[string]json.RawMessage, path, field string, lo, hi int64, required bool, def int64) (int64, error) {
	raw, ok := m[field]
	p := join(path, field)
	if !ok {
		if required {
			return 0, fieldError{p, "missing"}
		}
		return def, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fieldError{p, "not a number"}
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return 0, fieldError{p, "not an integer"}
	}
	if v < lo || v > hi {
		return 0, fieldError{p, fmt.Sprintf("must be between %d and %d", lo, hi)}
	}
	return v, nil
}

// readHash reads a u64 given as a number or as a decimal string.
func readHash(m map[string]json.RawMessage, path string) (uint64, error) {
	p := join(path, "flowHash")
	raw, ok := m["flowHash"]
	if !ok {
		return 0, fieldError{p, "missing"}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return 0, fieldError{p, "not a number or a decimal string"}
		}
		s = n.String()
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fieldError{p, "not an unsigned 64-bit integer"}
	}
	return v, nil
}

func readScenario(data []byte) (oracleScenarioFile, error) {
	var sc oracleScenarioFile
	top, err := readObject(data, "", []string{"config", "requests"})
	if err != nil {
		if fe, ok := err.(fieldError); ok && fe.path == "" {
			return sc, fmt.Errorf("not a JSON object")
		}
		return sc, err
	}
	craw, ok := top["config"]
	if !ok {
		return sc, fieldError{"config", "missing"}
	}
	c, err := readObject(craw, "config", []string{"queues", "handSize", "queueLengthLimit", "concurrencyLimit", "requestWaitLimitNs"})
	if err != nil {
		return sc, err
	}
	ints := []struct {
		field  string
		lo, hi int64
		dst    *int
	}{
		{"queues", 1, 1 << 20, &sc.config.queues},
		{"handSize", 1, 8, &sc.config.handSize},
		{"queueLengthLimit", 0, 1 << 20, &sc.config.queueLengthLimit},
		{"concurrencyLimit", 1, 1 << 20, &sc.config.concurrencyLimit},
	}
	for _, f := range ints {
		v, err := readInt(c, "config", f.field, f.lo, f.hi, true, 0)
		if err != nil {
			return sc, err
		}
		*f.dst = int(v)
	}
	if sc.config.handSize > sc.config.queues {
		return sc, fieldError{"config.handSize", "must not exceed config.queues"}
	}
	if _, err := checkConfig(fq.QueuingConfig{DesiredNumQueues: sc.config.queues, HandSize: sc.config.handSize}); err != nil {
		return sc, fieldError{"config.handSize", err.Error()}
	}
	if sc.config.requestWaitLimitNs, err = readInt(c, "config", "requestWaitLimitNs", 0, oracleMaxNs, false, 0); err != nil {
		return sc, err
	}
	rraw, ok := top["requests"]
	if !ok {
		return sc, fieldError{"requests", "missing"}
	}
	var list []json.RawMessage
	if err := json.Unmarshal(rraw, &list); err != nil {
		return sc, fieldError{"requests", "not a JSON array"}
	}
	for i, raw := range list {
		path := fmt.Sprintf("requests[%d]", i)
		m, err := readObject(raw, path, []string{"arrivalNs", "flowHash", "initialSeats", "finalSeats", "additionalLatencyNs", "executionNs", "deadlineNs"})
		if err != nil {
			return sc, err
		}
		var r oracleRequest
		if r.arrivalNs, err = readInt(m, path, "arrivalNs", 0, oracleMaxNs, true, 0); err != nil {
			return sc, err
		}
		if r.flowHash, err = readHash(m, path); err != nil {
			return sc, err
		}
		seats, err := readInt(m, path, "initialSeats", 1, oracleMaxSeats, true, 0)
		if err != nil {
			return sc, err
		}
		r.initialSeats = uint64(seats)
		if seats, err = readInt(m, path, "finalSeats", 0, oracleMaxSeats, false, 0); err != nil {
			return sc, err
		}
		r.finalSeats = uint64(seats)
		if r.additionalLatencyNs, err = readInt(m, path, "additionalLatencyNs", 0, oracleMaxNs, false, 0); err != nil {
			return sc, err
		}
		if r.executionNs, err = readInt(m, path, "executionNs", 1, oracleMaxNs, true, 0); err != nil {
			return sc, err
		}
		if r.deadlineNs, err = readInt(m, path, "deadlineNs", 0, oracleMaxNs, false, -1); err != nil {
			return sc, err
		}
		if r.deadlineNs >= 0 && r.deadlineNs <= r.arrivalNs {
			return sc, fieldError{join(path, "deadlineNs"), "must be after arrivalNs"}
		}
		sc.requests = append(sc.requests, r)
	}
	return sc, nil
}

// --- running ---

// oraclePromise is a WriteOnce that never blocks: the driver reads it only once it is set. It
// logs every request that is told to execute, in order.
type oraclePromise struct {
	index int
	log   *[]int
	isSet bool
	value interface{}
}

func (p *oraclePromise) Get() interface{} {
	if !p.isSet {
		panic("oracle: Get of an unset decision")
	}
	return p.value
}

func (p *oraclePromise) Set(value interface{}) bool {
	if p.isSet {
		return false
	}
	p.isSet = true
	p.value = value
	if value == decisionExecute {
		*p.log = append(*p.log, p.index)
	}
	return true
}

type oracleIndexKey struct{}

func metricsPair(g oracleNoopGauge) metrics.RatioedGaugePair {
	return metrics.RatioedGaugePair{RequestsWaiting: g, RequestsExecuting: g}
}

type oracleNoopGauge struct{}

func (oracleNoopGauge) Set(float64)            {}
func (oracleNoopGauge) Inc()                   {}
func (oracleNoopGauge) Dec()                   {}
func (oracleNoopGauge) Add(float64)            {}
func (oracleNoopGauge) SetToCurrentTime()      {}
func (oracleNoopGauge) SetDenominator(float64) {}

const (
	oraclePending = iota
	oracleWaiting
	oracleExecuting
	oracleDone
)

type oracleState struct {
	phase        int
	req          *request
	leaveAt      int64 // when it leaves its queue undispatched; math.MaxInt64: never
	leaveReason  string
	finishAt     int64
	outcome      oracleOutcome
	dispatchedAt int64
}

func runScenario(sc oracleScenarioFile) ([]oracleOutcome, error) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk, _ := testeventclock.NewFake(start, 0, rand.New(rand.NewSource(1)))
	var log []int
	factory := newTestableQueueSetFactory(clk, func(qs *queueSet) promiseFactory {
		return func(initial interface{}, ctx context.Context, doneVal interface{}) promise.WriteOnce {
			p := &oraclePromise{index: ctx.Value(oracleIndexKey{}).(int), log: &log}
			if initial != nil {
				p.Set(initial)
			}
			return p
		}
	})
	cfg := sc.config
	gauge := oracleNoopGauge{}
	qsc, err := factory.BeginConstruction(fq.QueuingConfig{
		Name:             "oracle",
		DesiredNumQueues: cfg.queues,
		QueueLengthLimit: cfg.queueLengthLimit,
		HandSize:         cfg.handSize,
	}, metricsPair(gauge), gauge, gauge)
	if err != nil {
		return nil, err
	}
	qs := qsc.Complete(fq.DispatchingConfig{ConcurrencyLimit: cfg.concurrencyLimit, ConcurrencyDenominator: cfg.concurrencyLimit}).(*queueSet)

	n := len(sc.requests)
	states := make([]oracleState, n)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return sc.requests[order[a]].arrivalNs < sc.requests[order[b]].arrivalNs
	})
	next := 0 // into order
	seq := 0
	var now int64
	at := func(ns int64) time.Time { return start.Add(time.Duration(ns)) }
	// Takes the dispatches logged since the last call: they happened now.
	collect := func() {
		for _, i := range log {
			st := &states[i]
			if st.phase != oracleWaiting && st.phase != oraclePending {
				panic(fmt.Sprintf("oracle: request %d dispatched while not waiting", i))
			}
			st.phase = oracleExecuting
			st.dispatchedAt = now
			st.finishAt = now + sc.requests[i].executionNs
			d, s := now, seq
			st.outcome.DispatchedAtNs = &d
			st.outcome.DispatchSeq = &s
			seq++
		}
		log = log[:0]
	}
	for {
		t := int64(math.MaxInt64)
		if next < n {
			t = sc.requests[order[next]].arrivalNs
		}
		for i := range states {
			switch states[i].phase {
			case oracleWaiting:
				t = min(t, states[i].leaveAt)
			case oracleExecuting:
				t = min(t, states[i].finishAt)
			}
		}
		if et, ok := clk.GetNextTime(); ok {
			t = min(t, int64(et.Sub(start)))
		}
		if t == math.MaxInt64 {
			break
		}
		now = t
		// 1. Contexts that end now: the time passes without running the clock's events yet.
		clk.FakePassiveClock.SetTime(at(now))
		for i := range states {
			st := &states[i]
			if st.phase != oracleWaiting || st.leaveAt > now {
				continue
			}
			qs.lock.Lock()
			set := st.req.decision.Set(decisionCancel)
			qs.lock.Unlock()
			if !set {
				panic(fmt.Sprintf("oracle: request %d decided while waiting", i))
			}
			if exec, _ := st.req.wait(); exec {
				panic(fmt.Sprintf("oracle: request %d executes after its context ended", i))
			}
			st.phase = oracleDone
			r := now
			st.outcome = oracleOutcome{Outcome: "rejected", Reason: st.leaveReason, RejectedAtNs: &r}
		}
		collect()
		// 2. The queue set's own events (final seats released).
		clk.SetTime(at(now))
		collect()
		// 3. Executions that end now.
		for i := range states {
			st := &states[i]
			if st.phase != oracleExecuting || st.finishAt != now {
				continue
			}
			st.phase = oracleDone
			f := now
			st.outcome.Outcome = "dispatched"
			st.outcome.FinishedAtNs = &f
			qs.finishRequestAndDispatchAsMuchAsPossible(st.req)
			collect()
		}
		// 4. Arrivals.
		for next < n && sc.requests[order[next]].arrivalNs == now {
			i := order[next]
			next++
			r := sc.requests[i]
			st := &states[i]
			ctx := context.WithValue(context.Background(), oracleIndexKey{}, i)
			we := fcrequest.WorkEstimate{
				InitialSeats:      r.initialSeats,
				FinalSeats:        r.finalSeats,
				AdditionalLatency: time.Duration(r.additionalLatencyNs),
			}
			st.phase = oracleWaiting
			st.leaveAt = math.MaxInt64
			if cfg.requestWaitLimitNs > 0 {
				st.leaveAt = now + cfg.requestWaitLimitNs
				st.leaveReason = "time-out"
			}
			if r.deadlineNs >= 0 && r.deadlineNs < st.leaveAt {
				st.leaveAt = r.deadlineNs
				st.leaveReason = "cancelled"
			}
			req, _ := qs.StartRequest(ctx, &we, r.flowHash, "", "oracle", i, nil, nil)
			if req == nil {
				st.phase = oracleDone
				rj := now
				st.outcome = oracleOutcome{Outcome: "rejected", Reason: "queue-full", RejectedAtNs: &rj}
				continue
			}
			st.req = req.(*request)
			collect()
		}
	}
	out := make([]oracleOutcome, n)
	for i := range states {
		if states[i].phase != oracleDone {
			return nil, fmt.Errorf("request %d neither finished nor rejected at the end", i)
		}
		out[i] = states[i].outcome
	}
	if !qs.isIdleLocked() || qs.totSeatsInUse != 0 {
		return nil, fmt.Errorf("the queue set is not idle at the end")
	}
	return out, nil
}
