package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// A trace replayed on a real Kueue, the way Kueue's scheduler performance
// runner drives it: Workloads are created at their submission times on a
// compressed clock, and each admitted one is marked Finished after its
// duration, which releases its quota. Every team is a namespace with a
// LocalQueue "q" of one ClusterQueue "replay" that orders its LocalQueues
// by Admission Fair Sharing; with Steer the controller sets their weights
// from a ledger the replay writes each trace hour with what the admitted
// workloads cost. The outcomes are on the trace's clock, for comparison
// with the simulator on the same jobs.

// ReplayJob is one job of the trace.
type ReplayJob struct {
	ID, Team         string
	Submit, Duration time.Duration
	Pods, PerPod     int
	// Resource is what its pods ask for; empty: nvidia.com/gpu.
	Resource string
	// Flavors, when set, are the only flavors it may run on: its pods'
	// required node affinity on the flavors' gpuledger.io/flavor node
	// label, which Kueue matches when it assigns a flavor.
	Flavors []string
	// RunTime, when set, is how long it runs on each flavor (a flavor's
	// throughput); a flavor not in it: Duration.
	RunTime map[string]time.Duration
}

// runTime is how long j runs on flavor.
func (j ReplayJob) runTime(flavor string) time.Duration {
	if d, ok := j.RunTime[flavor]; ok {
		return d
	}
	return j.Duration
}

func (j ReplayJob) resource() string {
	if j.Resource == "" {
		return gpuResource
	}
	return j.Resource
}

// FlavorLabel is the node label that names a replay flavor's nodes.
const FlavorLabel = "gpuledger.io/flavor"

const gpuResource = "nvidia.com/gpu"

// ReplayFlavor is one ResourceFlavor of the replay's ClusterQueue, in the
// order Kueue tries them.
type ReplayFlavor struct {
	Name string
	// GPUs is its quota in units of Resource (nvidia.com/gpu when
	// empty; a MIG profile's slices); PriceMicrosPerGPUHour is per unit.
	GPUs                  int
	PriceMicrosPerGPUHour int64
	Resource              string
}

// ReplayOptions configures ReplayOnKueue.
type ReplayOptions struct {
	Flavors []ReplayFlavor
	// Speedup is trace seconds per real second.
	Speedup float64
	// Limit ends the replay this long after the start (trace clock); 0:
	// when every job has finished.
	Limit time.Duration
	// MaxPending bounds each team's backlog in Kueue: a team has at most
	// this many Workloads created and never admitted, and its next one is
	// created when one of them is admitted, at the later of that time and
	// its submission (sim.ReplayOptions.MaxPending). 0: no bound.
	MaxPending int
	// NoFairSharing runs the ClusterQueue without Admission Fair Sharing
	// (Kueue's default: BestEffortFIFO by priority and creation).
	NoFairSharing bool
	// Quotas, when set, give every team a ClusterQueue of its own, named
	// after it, in one cohort, with these nominal quotas (team → flavor →
	// units of the flavor's resource) and no borrowing or lending limit,
	// instead of one ClusterQueue of Flavors' GPUs; the Kueue must run
	// cohort fair sharing (a fairSharing block in its configuration).
	// With Steer the controller then sets the ClusterQueues' weights
	// (Options.ClusterQueueWeights).
	Quotas map[string]map[string]int
	// Steer runs gpuledger's weights: every WeightInterval (trace clock)
	// the controller sets the LocalQueues' fairSharing.weight from Store,
	// decayed with HalfLife, into which the replay writes each trace hour
	// the cost of the GPUs the admitted workloads held. Epoch is the
	// trace's start as a ledger hour.
	Steer bool
	// FlavorTargets, with Steer: the ClusterQueue has gpuledger's
	// AdmissionCheck, which the controller answers with the flavor
	// targets (Options.FlavorTargets), retrying a held workload after a
	// second of the real clock.
	FlavorTargets  bool
	WeightInterval time.Duration
	HalfLife       time.Duration
	Store          ledger.Store
	Epoch          time.Time
	// Progress, when set, is told every few seconds how far the replay is.
	Progress func(created, admitted, finished, total int)
	// Hourly, when set, is called as each trace hour ends, with its
	// number from 1, from a goroutine of its own (a call that takes
	// longer than the hour delays the next).
	Hourly func(ctx context.Context, hour int)
	Log    *slog.Logger
}

// ReplayOutcome is what became of a job that was admitted, on the trace's
// clock: Finished is 0 when it still ran at the end.
type ReplayOutcome struct {
	ID, Team, Flavor   string
	GPUs               int
	Submit             time.Duration
	Admitted, Finished time.Duration
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// replayQueue is the ClusterQueue the replay creates.
const replayQueue = "replay"

// ReplayOnKueue replays jobs on the Kueue that cfg reaches (a cluster of
// its own: it creates the flavors, a ClusterQueue, a namespace per team,
// and a Workload per job) and returns the outcomes of the admitted jobs
// in submission order. The Kueue must run Admission Fair Sharing with its
// usage half-life and sampling interval compressed by Speedup too.
func ReplayOnKueue(ctx context.Context, cfg *rest.Config, jobs []ReplayJob, o ReplayOptions) ([]ReplayOutcome, error) {
	if o.Speedup <= 0 || len(o.Flavors) == 0 {
		return nil, fmt.Errorf("replay: speedup %g with %d flavors: want a speedup > 0 and a flavor", o.Speedup, len(o.Flavors))
	}
	if o.Steer && (o.Store == nil || o.WeightInterval <= 0 || o.HalfLife <= 0) {
		return nil, errors.New("replay: steering needs a Store, a WeightInterval and a HalfLife")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	jobs = append([]ReplayJob(nil), jobs...)
	sort.SliceStable(jobs, func(i, k int) bool { return jobs[i].Submit < jobs[k].Submit })
	teams := map[string]bool{}
	for _, j := range jobs {
		if !dnsLabel.MatchString(j.Team) || len(j.Team) > 63 {
			return nil, fmt.Errorf("replay: job %s: team %q is not a namespace name (a DNS label)", j.ID, j.Team)
		}
		if j.Pods <= 0 || j.PerPod <= 0 {
			return nil, fmt.Errorf("replay: job %s: %d pods of %d GPUs: want at least one of one", j.ID, j.Pods, j.PerPod)
		}
		teams[j.Team] = true
	}
	for t := range o.Quotas {
		if !teams[t] {
			return nil, fmt.Errorf("replay: quotas for team %q, which has no job", t)
		}
	}
	if o.Quotas != nil {
		for t := range teams {
			if _, ok := o.Quotas[t]; !ok {
				return nil, fmt.Errorf("replay: team %q has jobs but no quota", t)
			}
		}
	}
	tc, unitPrice := replayTeams(teams, o.Flavors, o.Quotas)
	c, err := New(cfg, Options{Teams: *tc, Store: nopStore(o.Store), HalfLife: o.HalfLife, Log: o.Log,
		FlavorTargets: o.FlavorTargets, TargetRetryAfter: time.Second, ClusterQueueWeights: o.Steer && o.Quotas != nil})
	if err != nil {
		return nil, err
	}
	if err := c.createReplayQueues(ctx, o.Flavors, teams, o.Quotas, !o.NoFairSharing, o.FlavorTargets); err != nil {
		return nil, err
	}
	r := &kueueReplay{c: c, o: o, jobs: jobs, byName: map[string]int{}, out: make([]ReplayOutcome, len(jobs)),
		admitted: make([]bool, len(jobs)), done: make(chan struct{}), unitPrice: unitPrice}
	for i := range jobs {
		r.byName[jobName(i)] = i
	}
	if o.MaxPending > 0 {
		r.slots = map[string]chan struct{}{}
		for t := range teams {
			r.slots[t] = make(chan struct{}, o.MaxPending)
		}
	}
	return r.run(ctx)
}

// nopStore stands in for the ledger when the replay does not steer.
func nopStore(s ledger.Store) ledger.Store {
	if s != nil {
		return s
	}
	return emptyStore{}
}

type emptyStore struct{ ledger.Store }

func (emptyStore) Close() error { return nil }

func jobName(i int) string { return "j" + strconv.Itoa(i) }

// replayTeams are the replay's teams for the controller, each its own
// namespace and ClusterQueue (or the shared one), and each flavor's price
// of a unit of its resource. ReplayFlavor prices a unit (a MIG slice);
// Teams prices a whole GPU, as the configuration does.
func replayTeams(teams map[string]bool, flavors []ReplayFlavor, quotas map[string]map[string]int) (*Teams, map[string]int64) {
	tc := &Teams{Cluster: replayQueue, ByNamespace: map[string]string{}, ByClusterQueue: map[string]string{},
		PriceMicrosPerGPUHour: map[string]int64{}}
	for t := range teams {
		tc.ByNamespace[t] = t
		tc.ByClusterQueue[clusterQueueOf(t, quotas)] = t
	}
	unitPrice := map[string]int64{}
	for _, f := range flavors {
		unitPrice[f.Name] = f.PriceMicrosPerGPUHour
		tc.PriceMicrosPerGPUHour[f.Name] = f.PriceMicrosPerGPUHour
		if share, ok := MIGShare(f.Resource); ok {
			tc.PriceMicrosPerGPUHour[f.Name] = int64(math.Round(float64(f.PriceMicrosPerGPUHour) / share))
		}
	}
	return tc, unitPrice
}

// clusterQueueOf is the ClusterQueue of a team's LocalQueue: its own in
// the cohort layout, else the shared one.
func clusterQueueOf(team string, quotas map[string]map[string]int) string {
	if quotas != nil {
		return team
	}
	return replayQueue
}

// resourceGroups are a ClusterQueue's: one group per resource, its flavors
// in the given order, with the nominal quota quota gives each flavor.
func resourceGroups(flavors []ReplayFlavor, quota func(ReplayFlavor) int) []any {
	var resources []string
	groups := map[string][]any{}
	for _, f := range flavors {
		res := f.Resource
		if res == "" {
			res = gpuResource
		}
		if _, ok := groups[res]; !ok {
			resources = append(resources, res)
		}
		groups[res] = append(groups[res], map[string]any{"name": f.Name, "resources": []any{map[string]any{"name": res, "nominalQuota": int64(quota(f))}}})
	}
	var rgs []any
	for _, res := range resources {
		rgs = append(rgs, map[string]any{"coveredResources": []any{res}, "flavors": groups[res]})
	}
	return rgs
}

// createReplayQueues creates the flavors, the ClusterQueue (or with quotas
// one per team, in a cohort) and a namespace with a LocalQueue per team,
// and waits until Kueue has them active.
func (c *Controller) createReplayQueues(ctx context.Context, flavors []ReplayFlavor, teams map[string]bool, quotas map[string]map[string]int, afs, check bool) error {
	for _, f := range flavors {
		if err := c.create(ctx, schema.GroupVersionResource{Group: kueueGroup, Version: "v1beta2", Resource: "resourceflavors"}, "",
			map[string]any{"kind": "ResourceFlavor", "metadata": map[string]any{"name": f.Name},
				"spec": map[string]any{"nodeLabels": map[string]any{FlavorLabel: f.Name}}}); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(teams))
	for t := range teams {
		names = append(names, t)
	}
	sort.Strings(names)
	specs := map[string]map[string]any{} // ClusterQueue → spec
	if quotas == nil {
		specs[replayQueue] = map[string]any{"resourceGroups": resourceGroups(flavors, func(f ReplayFlavor) int { return f.GPUs })}
	} else {
		for _, t := range names {
			specs[t] = map[string]any{"cohortName": replayQueue,
				"resourceGroups": resourceGroups(flavors, func(f ReplayFlavor) int { return quotas[t][f.Name] })}
		}
	}
	for _, spec := range specs {
		spec["namespaceSelector"] = map[string]any{}
		if afs {
			spec["admissionScope"] = map[string]any{"admissionMode": "UsageBasedAdmissionFairSharing"}
		}
		if check {
			spec["admissionChecksStrategy"] = map[string]any{"admissionChecks": []any{map[string]any{"name": "gpuledger"}}}
		}
	}
	if check {
		if err := c.create(ctx, checksGVR, "", map[string]any{"kind": "AdmissionCheck", "metadata": map[string]any{"name": "gpuledger"},
			"spec": map[string]any{"controllerName": ControllerName}}); err != nil {
			return err
		}
		if err := c.syncChecks(ctx); err != nil {
			return err
		}
	}
	cqNames := make([]string, 0, len(specs))
	for name := range specs {
		cqNames = append(cqNames, name)
	}
	sort.Strings(cqNames)
	for _, name := range cqNames {
		if err := c.create(ctx, clusterQsGVR, "", map[string]any{"kind": "ClusterQueue", "metadata": map[string]any{"name": name},
			"spec": specs[name]}); err != nil {
			return err
		}
	}
	for _, t := range names {
		if err := c.create(ctx, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "",
			map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": t}}); err != nil {
			return err
		}
		if err := c.create(ctx, localQueuesGVR, t, map[string]any{"kind": "LocalQueue", "metadata": map[string]any{"name": "q", "namespace": t},
			"spec": map[string]any{"clusterQueue": clusterQueueOf(t, quotas)}}); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(time.Minute)
	for len(cqNames) > 0 {
		cq, err := c.dyn.Resource(clusterQsGVR).Get(ctx, cqNames[0], metav1.GetOptions{})
		if err == nil {
			if _, ok := condition(cq, "Active"); ok {
				cqNames = cqNames[1:]
				continue
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the ClusterQueue %s is not active after a minute: %v", cqNames[0], err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func (c *Controller) create(ctx context.Context, gvr schema.GroupVersionResource, ns string, obj map[string]any) error {
	if _, ok := obj["apiVersion"]; !ok {
		obj["apiVersion"] = kueueGroup + "/v1beta2"
	}
	u := &unstructured.Unstructured{Object: obj}
	var err error
	if ns == "" {
		_, err = c.dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager})
	} else {
		_, err = c.dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return fmt.Errorf("create %s %s: %w", obj["kind"], u.GetName(), err)
	}
	return nil
}

// kueueReplay is the state of one ReplayOnKueue.
type kueueReplay struct {
	c      *Controller
	o      ReplayOptions
	jobs   []ReplayJob
	byName map[string]int
	begin  time.Time

	// unitPrice is each flavor's price of a unit of its resource.
	unitPrice map[string]int64
	// slots, with MaxPending, hold a token per team's Workload created
	// and not yet admitted.
	slots map[string]chan struct{}

	mu                          sync.Mutex
	out                         []ReplayOutcome
	admitted                    []bool
	created, nAdmitted, nFinish int
	err                         error
	done                        chan struct{}
	closed                      bool
}

// clock is the trace's time now.
func (r *kueueReplay) clock() time.Duration {
	return time.Duration(float64(time.Since(r.begin)) * r.o.Speedup)
}

// real is the wall time at trace time d.
func (r *kueueReplay) real(d time.Duration) time.Time {
	return r.begin.Add(time.Duration(float64(d) / r.o.Speedup))
}

func (r *kueueReplay) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
	r.finishLocked()
}

func (r *kueueReplay) finishLocked() {
	if !r.closed {
		r.closed = true
		close(r.done)
	}
}

func (r *kueueReplay) run(parent context.Context) ([]ReplayOutcome, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	factory := dynamicinformer.NewDynamicSharedInformerFactory(r.c.dyn, 0)
	inf := factory.ForResource(workloadsGVR).Informer()
	// The controller answers its check from a worker of its own, so that
	// its API calls do not hold up the informer's events.
	checks := make(chan *unstructured.Unstructured, 4096)
	if r.o.FlavorTargets {
		r.c.mu.Lock()
		r.c.workloads = storeLister(inf.GetStore())
		r.c.mu.Unlock()
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case u := <-checks:
					if evicted(u) {
						r.releaseEvicted(ctx, u)
						continue
					}
					r.c.answerFresh(ctx, u)
				}
			}
		}()
	}
	onEvent := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok && r.o.FlavorTargets && (r.c.pendingCheck(u) != "" || evicted(u)) {
			select {
			case checks <- u:
			case <-ctx.Done():
			}
		}
		r.observe(ctx, obj)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onEvent,
		UpdateFunc: func(_, obj any) { onEvent(obj) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	r.begin = time.Now()
	// The controller's clock is the trace's: the ledger's hours are.
	r.c.o.Now = func() time.Time { return r.o.Epoch.Add(r.clock()) }
	r.c.o.ObjectTime = func(at time.Time) time.Time {
		return r.o.Epoch.Add(time.Duration(float64(at.Sub(r.begin)) * r.o.Speedup))
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.submit(ctx) }()
	if r.o.Steer {
		wg.Add(1)
		go func() { defer wg.Done(); r.steer(ctx) }()
	}
	if r.o.Hourly != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := 1; ; h++ {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(r.real(time.Duration(h) * time.Hour))):
				}
				r.o.Hourly(ctx, h)
			}
		}()
	}
	var limit <-chan time.Time
	if r.o.Limit > 0 {
		t := time.NewTimer(time.Until(r.real(r.o.Limit)))
		defer t.Stop()
		limit = t.C
	}
	progress := time.NewTicker(15 * time.Second)
	defer progress.Stop()
	report := func() {
		if r.o.Progress != nil {
			r.mu.Lock()
			c, a, f := r.created, r.nAdmitted, r.nFinish
			r.mu.Unlock()
			r.o.Progress(c, a, f, len(r.jobs))
		}
	}
loop:
	for {
		select {
		case <-parent.Done():
			r.fail(parent.Err())
			break loop
		case <-r.done:
			break loop
		case <-limit:
			break loop
		case <-progress.C:
			report()
		}
	}
	end := r.clock()
	report()
	cancel()
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finishLocked()
	if r.err != nil && parent.Err() == nil {
		return nil, r.err
	}
	var out []ReplayOutcome
	for i, o := range r.out {
		if !r.admitted[i] {
			continue
		}
		if o.Finished > end {
			o.Finished = 0
		}
		out = append(out, o)
	}
	return out, parent.Err()
}

// submit creates each job's Workload at its submission time; with
// MaxPending, each team's from a goroutine of its own, once the team has
// a slot.
func (r *kueueReplay) submit(ctx context.Context) {
	if r.slots == nil {
		for i := range r.jobs {
			if !r.create(ctx, i) {
				return
			}
		}
		return
	}
	byTeam := map[string][]int{}
	for i, j := range r.jobs {
		byTeam[j.Team] = append(byTeam[j.Team], i)
	}
	var wg sync.WaitGroup
	for team, is := range byTeam {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range is {
				select {
				case <-ctx.Done():
					return
				case r.slots[team] <- struct{}{}:
				}
				if !r.create(ctx, i) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// create creates job i's Workload at its submission time and says whether
// the replay goes on.
func (r *kueueReplay) create(ctx context.Context, i int) bool {
	j := r.jobs[i]
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(r.real(j.Submit))):
	}
	pod := map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{
		"name": "trainer", "image": "registry.k8s.io/pause:3.10",
		"resources": map[string]any{"requests": map[string]any{j.resource(): strconv.Itoa(j.PerPod)},
			"limits": map[string]any{j.resource(): strconv.Itoa(j.PerPod)}}}}}
	if len(j.Flavors) > 0 {
		values := make([]any, len(j.Flavors))
		for k, f := range j.Flavors {
			values[k] = f
		}
		pod["affinity"] = map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": FlavorLabel, "operator": "In", "values": values}}}}}}}
	}
	wl := map[string]any{"kind": "Workload", "metadata": map[string]any{"name": jobName(i), "namespace": j.Team},
		"spec": map[string]any{"queueName": "q", "podSets": []any{map[string]any{"name": "main", "count": int64(j.Pods),
			"template": map[string]any{"spec": pod}}}}}
	if err := r.c.create(ctx, workloadsGVR, j.Team, wl); err != nil {
		if ctx.Err() == nil {
			r.fail(fmt.Errorf("job %s: %w", j.ID, err))
		}
		return false
	}
	r.mu.Lock()
	r.created++
	r.mu.Unlock()
	return true
}

// observe records a Workload's admission and marks it Finished after its
// duration.
func (r *kueueReplay) observe(ctx context.Context, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	i, ok := r.byName[u.GetName()]
	if !ok || !r.isAdmitted(u) {
		return
	}
	now := r.clock()
	r.mu.Lock()
	if r.admitted[i] {
		r.mu.Unlock()
		return
	}
	j := r.jobs[i]
	r.admitted[i] = true
	r.nAdmitted++
	if r.slots != nil {
		select {
		case <-r.slots[j.Team]:
		default:
		}
	}
	flavor := admittedFlavor(u, j.resource())
	r.out[i] = ReplayOutcome{ID: j.ID, Team: j.Team, Flavor: flavor, GPUs: j.Pods * j.PerPod, Submit: j.Submit, Admitted: now}
	r.mu.Unlock()
	time.AfterFunc(time.Until(r.real(now+j.runTime(flavor))), func() { r.finish(ctx, i, u.GetNamespace(), u.GetName()) })
}

// evicted says whether Kueue evicted a workload that still holds its
// quota reservation (a held check's Retry evicts it).
func evicted(u *unstructured.Unstructured) bool {
	_, ev := condition(u, "Evicted")
	_, reserved := condition(u, "QuotaReserved")
	return ev && reserved
}

// releaseEvicted does for an evicted Workload what Kueue's job
// integration does once the job has stopped (the replay's Workloads have
// no job): it clears the quota reservation (QuotaReserved False, reason
// Pending, no status.admission) and marks it Requeued False with the
// eviction's reason, after which Kueue requeues it when its backoff (the
// check's requeueAfterSeconds) ends.
func (r *kueueReplay) releaseEvicted(ctx context.Context, u *unstructured.Unstructured) {
	res := r.c.dyn.Resource(workloadsGVR).Namespace(u.GetNamespace())
	fresh, err := res.Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil || !evicted(fresh) {
		return
	}
	var reason, message string
	conds, _, _ := unstructured.NestedSlice(fresh.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Evicted" {
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
		}
	}
	now := time.Now().UTC().Format(time.RFC3339)
	set := func(typ, status, reason, message string) {
		c := map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "lastTransitionTime": now,
			"observedGeneration": fresh.GetGeneration()}
		for i, old := range conds {
			if m, _ := old.(map[string]any); m["type"] == typ {
				conds[i] = c
				return
			}
		}
		conds = append(conds, c)
	}
	set("QuotaReserved", "False", "Pending", message)
	set("Requeued", "False", reason, message)
	if err := unstructured.SetNestedSlice(fresh.Object, conds, "status", "conditions"); err != nil {
		return
	}
	unstructured.RemoveNestedField(fresh.Object, "status", "admission")
	if _, err := res.UpdateStatus(ctx, fresh, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil && ctx.Err() == nil {
		r.o.Log.Warn("replay: release an evicted workload's quota", "workload", u.GetNamespace()+"/"+u.GetName(), "err", err)
	}
}

func (r *kueueReplay) isAdmitted(u *unstructured.Unstructured) bool {
	_, ok := condition(u, "Admitted")
	return ok
}

// admittedFlavor is the flavor Kueue assigned the workload's resource.
func admittedFlavor(u *unstructured.Unstructured, resource string) string {
	assign, _, _ := unstructured.NestedSlice(u.Object, "status", "admission", "podSetAssignments")
	for _, a := range assign {
		m, _ := a.(map[string]any)
		if f, ok, _ := unstructured.NestedString(m, "flavors", resource); ok {
			return f
		}
	}
	return ""
}

// finish sets the Workload's Finished condition, as a job integration
// does when its pods succeed: Kueue then releases the quota.
func (r *kueueReplay) finish(ctx context.Context, i int, ns, name string) {
	if ctx.Err() != nil {
		return
	}
	patch := map[string]any{"apiVersion": kueueGroup + "/v1beta2", "kind": "Workload", "metadata": map[string]any{"name": name, "namespace": ns},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Finished", "status": "True", "reason": "Succeeded",
			"message": "the replayed job ran its duration", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}}
	if err := r.c.applyStatus(ctx, workloadsGVR, ns, name, patch); err != nil {
		if ctx.Err() == nil {
			r.fail(fmt.Errorf("mark workload %s/%s finished: %w", ns, name, err))
		}
		return
	}
	now := r.clock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out[i].Finished = now
	r.nFinish++
	if r.nFinish == len(r.jobs) {
		r.finishLocked()
	}
}

// steer writes each trace hour's cost into the ledger as it ends and has
// the controller update the weights every WeightInterval.
func (r *kueueReplay) steer(ctx context.Context) {
	nextHour, nextWeights := time.Hour, time.Duration(0)
	for {
		at := min(nextHour, nextWeights)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(r.real(at))):
		}
		if at == nextHour {
			if err := r.writeHour(ctx, nextHour-time.Hour); err != nil {
				if ctx.Err() == nil {
					r.fail(err)
				}
				return
			}
			nextHour += time.Hour
		}
		if at == nextWeights {
			if err := r.c.UpdateWeights(ctx); err != nil && ctx.Err() == nil {
				r.o.Log.Warn("replay: weights not updated", "err", err)
			}
			nextWeights += r.o.WeightInterval
		}
	}
}

// writeHour writes what the admitted workloads held during the trace hour
// from: per team and flavor, GPU-seconds at the flavor's price.
func (r *kueueReplay) writeHour(ctx context.Context, from time.Duration) error {
	to := from + time.Hour
	now := r.clock()
	type key struct{ team, flavor string }
	sec := map[key]float64{}
	r.mu.Lock()
	for i, o := range r.out {
		if !r.admitted[i] {
			continue
		}
		end := o.Finished
		if end == 0 {
			end = now
		}
		if d := min(end, to) - max(o.Admitted, from); d > 0 {
			sec[key{o.Team, o.Flavor}] += float64(o.GPUs) * d.Seconds()
		}
	}
	r.mu.Unlock()
	hour := r.o.Epoch.Add(from)
	var rows []ledger.Row
	for k, s := range sec {
		rows = append(rows, ledger.Row{Key: ledger.Key{Hour: hour, Cluster: replayQueue, Team: k.team, Namespace: k.team, LocalQueue: "q",
			ClusterQueue: clusterQueueOf(k.team, r.o.Quotas), Flavor: k.flavor}, GPUSeconds: s, CostMicros: int64(math.Round(s * float64(r.unitPrice[k.flavor]) / 3600))})
	}
	sort.Slice(rows, func(i, k int) bool { return rows[i].Team+rows[i].Flavor < rows[k].Team+rows[k].Flavor })
	if len(rows) == 0 {
		return nil
	}
	if err := r.o.Store.WriteHours(ctx, rows, nil); err != nil {
		return fmt.Errorf("write trace hour %s to the ledger: %w", hour.Format(time.RFC3339), err)
	}
	return nil
}
