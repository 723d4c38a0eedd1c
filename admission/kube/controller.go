package kube

import (
	"context"
	"errors"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/ledger"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ControllerName is the AdmissionCheck spec.controllerName gpuledger
// answers for.
const ControllerName = "gpuledger.io/budget"

// fieldManager owns what gpuledger writes (server-side apply).
const fieldManager = "gpuledger"

var (
	kueueGroup         = "kueue.x-k8s.io"
	workloadsGVR       = schema.GroupVersionResource{Group: kueueGroup, Version: "v1beta2", Resource: "workloads"}
	checksGVR          = schema.GroupVersionResource{Group: kueueGroup, Version: "v1beta2", Resource: "admissionchecks"}
	localQueuesGVR     = schema.GroupVersionResource{Group: kueueGroup, Version: "v1beta2", Resource: "localqueues"}
	clusterQsGVR       = schema.GroupVersionResource{Group: kueueGroup, Version: "v1beta2", Resource: "clusterqueues"}
	cohortsGVR         = schema.GroupVersionResource{Group: kueueGroup, Version: "v1beta2", Resource: "cohorts"}
	resourceFlavorsGVR = schema.GroupVersionResource{Group: kueueGroup, Version: "v1beta2", Resource: "resourceflavors"}
)

// Options configures a Controller.
type Options struct {
	Teams Teams
	// Store is the ledger the money comes from.
	Store ledger.Store
	// Interval between weight updates. Default 2 minutes.
	Interval time.Duration
	// HalfLife of the decayed spend, as in the simulator. Default 7 days.
	HalfLife time.Duration
	// Hysteresis: a weight is written when it moves by more than this
	// fraction. Default 0.1.
	Hysteresis float64
	// DryRun computes and reports (logs, Events) but writes no weight.
	DryRun bool
	// DefaultDuration prices a workload without
	// maximumExecutionTimeSeconds. Default 24 h.
	DefaultDuration time.Duration
	// RetryAfter is the requeueAfterSeconds of a held workload. Default 5 min.
	RetryAfter time.Duration
	// FlavorTargets: the check also holds a workload whose team holds its
	// money-fair share of the flavor Kueue assigned it while a team under
	// its share waits for that flavor (FlavorTargets), for
	// TargetRetryAfter (default RetryAfter); and after each answer a team
	// whose next workload would be held gets demotedWeight on its
	// LocalQueues until an answer finds it would not be (Demotions).
	FlavorTargets    bool
	TargetRetryAfter time.Duration
	// ClusterQueueWeights: also set the fairSharing.weight of the
	// ClusterQueues of every cohort, and of the Cohort objects under
	// another, from their spend against what their nominal quotas are
	// worth (ClusterQueueWeights), for Kueue's cohort fair sharing. Needs
	// patch on clusterqueues and cohorts.
	ClusterQueueWeights bool
	// IdlePenalty: the weights count the ledger's idle cost
	// 1+IdlePenalty times (admission.LedgerSpend). Default 0.
	IdlePenalty float64
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// ObjectTime maps a time Kubernetes wrote (a Workload condition's
	// lastTransitionTime) onto Now's clock; nil: the same clock. A replay
	// on a compressed clock sets it.
	ObjectTime func(time.Time) time.Time
	Log        *slog.Logger
}

// Stats counts what the controller did, for its metrics.
type Stats struct {
	WeightChanges, ChecksReady, ChecksHeld, ChecksFailedOpen, Errors atomic.Int64
}

// Controller steers one cluster's Kueue.
type Controller struct {
	o     Options
	dyn   dynamic.Interface
	core  kubernetes.Interface
	Stats Stats
	// updateMu serialises UpdateWeights.
	updateMu sync.Mutex
	mu       sync.Mutex
	teams    Teams
	checks   map[string]bool // our AdmissionChecks by name
	diffs    string
	// weights is what UpdateWeights last decided, by LocalQueue key;
	// cqWeights by ClusterQueue, cohortWeights by Cohort.
	weights       map[string]*queueWeight
	cqWeights     map[string]*queueWeight
	cohortWeights map[string]*queueWeight
	// pending is what waits per ClusterQueue, as UpdateWeights last saw.
	pending map[string]*PendingQueue
	// workloads lists the cluster's Workloads from an informer's cache
	// (Run's, or a replay's), for the flavor targets.
	workloads func() []*unstructured.Unstructured
	// flavors are the Kueue objects the targets need, read at flavorsAt
	// (wall clock) and kept a few seconds: checks come in bursts.
	flavors   Flavors
	flavorsAt time.Time
	// answeredReady is when the worker last answered a workload's check
	// Ready, by namespace/name: the informer's copy may not show it yet
	// when the next check is decided.
	answeredReady map[string]time.Time
	// demoted are the teams whose LocalQueues have demotedWeight, each
	// with the flavor its next workload would be held on (Demotions).
	demoted map[string]string
}

// New makes a controller for the cluster cfg reaches.
func New(cfg *rest.Config, o Options) (*Controller, error) {
	if o.Store == nil {
		return nil, errors.New("the controller needs a ledger Store")
	}
	if o.Interval <= 0 {
		o.Interval = 2 * time.Minute
	}
	if o.HalfLife <= 0 {
		o.HalfLife = 7 * 24 * time.Hour
	}
	if o.Hysteresis <= 0 {
		o.Hysteresis = admission.DefaultHysteresis
	}
	if o.DefaultDuration <= 0 {
		o.DefaultDuration = 24 * time.Hour
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 5 * time.Minute
	}
	if o.TargetRetryAfter <= 0 {
		o.TargetRetryAfter = o.RetryAfter
	}
	if err := admission.CheckIdlePenalty(o.IdlePenalty); err != nil {
		return nil, fmt.Errorf("-idlePenalty: %w", err)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Controller{o: o, dyn: dyn, core: core, teams: o.Teams, checks: map[string]bool{}, answeredReady: map[string]time.Time{}, weights: map[string]*queueWeight{},
		cqWeights: map[string]*queueWeight{}, cohortWeights: map[string]*queueWeight{}}, nil
}

// SetTeams replaces the business data (a configuration reload); held
// workloads are checked again at once.
func (c *Controller) SetTeams(ctx context.Context, t Teams) {
	c.mu.Lock()
	c.teams = t
	c.mu.Unlock()
	c.recheck(ctx)
}

func (c *Controller) currentTeams() *Teams {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.teams
	return &t
}

// Run answers the budget check as workloads come and updates the weights
// every Interval, until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.syncChecks(ctx); err != nil {
		return err
	}
	work := make(chan *unstructured.Unstructured, 1024)
	factory := dynamicinformer.NewDynamicSharedInformerFactory(c.dyn, 10*time.Minute)
	wl := factory.ForResource(workloadsGVR).Informer()
	enqueue := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		if c.pendingCheck(u) != "" {
			select {
			case work <- u:
			case <-ctx.Done():
			}
		}
	}
	if _, err := wl.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }}); err != nil {
		return err
	}
	ac := factory.ForResource(checksGVR).Informer()
	if _, err := ac.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.syncCheck(ctx, obj) },
		UpdateFunc: func(_, n any) { c.syncCheck(ctx, n) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				c.mu.Lock()
				delete(c.checks, u.GetName())
				c.mu.Unlock()
			}
		},
	}); err != nil {
		return err
	}
	c.mu.Lock()
	c.workloads = storeLister(wl.GetStore())
	c.mu.Unlock()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-work:
				c.answerFresh(ctx, u)
			}
		}
	}()
	tick := time.NewTicker(c.o.Interval)
	defer tick.Stop()
	for {
		if err := c.UpdateWeights(ctx); err != nil && ctx.Err() == nil {
			c.Stats.Errors.Add(1)
			c.o.Log.Warn("fair-sharing weights not updated", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// RunElected runs the controller while it holds the Lease
// namespace/name, so that of several replicas one acts.
func RunElected(ctx context.Context, c *Controller, namespace, name, identity string) error {
	lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Client: c.core.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: identity}}
	var runErr error
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{Lock: lock, ReleaseOnCancel: true,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, Name: name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				c.o.Log.Info("leading", "lease", namespace+"/"+name, "identity", identity)
				runErr = c.Run(ctx)
			},
			OnStoppedLeading: func() { c.o.Log.Info("stopped leading", "identity", identity) },
		}})
	return runErr
}

// syncChecks finds the AdmissionChecks gpuledger answers for, before the
// informers run, and marks them Active (Kueue waits for that before it
// uses a check); syncCheck then follows each change.
func (c *Controller) syncChecks(ctx context.Context) error {
	list, err := c.dyn.Resource(checksGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list AdmissionChecks: %w", err)
	}
	for i := range list.Items {
		if err := c.markCheck(ctx, &list.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// syncCheck takes one AdmissionCheck from the informer.
func (c *Controller) syncCheck(ctx context.Context, obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if err := c.markCheck(ctx, u); err != nil {
			c.Stats.Errors.Add(1)
			c.o.Log.Warn("AdmissionCheck", "err", err)
		}
	}
}

// markCheck records whether an AdmissionCheck is gpuledger's and, if it
// is, marks it Active.
func (c *Controller) markCheck(ctx context.Context, ac *unstructured.Unstructured) error {
	name, _, _ := unstructured.NestedString(ac.Object, "spec", "controllerName")
	c.mu.Lock()
	if name == ControllerName {
		c.checks[ac.GetName()] = true
	} else {
		delete(c.checks, ac.GetName())
	}
	c.mu.Unlock()
	if _, active := condition(ac, "Active"); name != ControllerName || active {
		return nil
	}
	patch := map[string]any{"apiVersion": kueueGroup + "/v1beta2", "kind": "AdmissionCheck", "metadata": map[string]any{"name": ac.GetName()},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Active", "status": "True", "reason": "Active",
			"message": "gpuledger answers this check from the cost ledger", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}}
	if err := c.applyStatus(ctx, checksGVR, "", ac.GetName(), patch); err != nil {
		return fmt.Errorf("mark AdmissionCheck %s active: %w", ac.GetName(), err)
	}
	return nil
}

// pendingCheck returns the name of one of our checks that is Pending on
// the workload, which must hold quota it reserved after its last
// eviction (Kueue resets the checks to Pending as it evicts: an answer
// then would overwrite the reset); "" when none.
func (c *Controller) pendingCheck(u *unstructured.Unstructured) string {
	if _, ok := condition(u, "QuotaReserved"); !ok || evictedSinceReserved(u) {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ourPending(u)
}

// evictedSinceReserved says whether Kueue evicted the workload after it
// last reserved quota (or it has no reservation): Kueue resets the checks
// as it evicts, and the reservation will not run.
func evictedSinceReserved(u *unstructured.Unstructured) bool {
	evictedAt, ok := condition(u, "Evicted")
	if !ok {
		return false
	}
	reservedAt, ok := condition(u, "QuotaReserved")
	return !ok || !reservedAt.After(evictedAt)
}

// ourPending returns the name of one of our checks whose state on the
// workload is Pending, "" when none. c.mu must be held.
func (c *Controller) ourPending(u *unstructured.Unstructured) string {
	states, _, _ := unstructured.NestedSlice(u.Object, "status", "admissionChecks")
	for _, s := range states {
		m, _ := s.(map[string]any)
		name, _ := m["name"].(string)
		if c.checks[name] && m["state"] == "Pending" {
			return name
		}
	}
	return ""
}

// recheck answers again every workload whose check is Pending.
func (c *Controller) recheck(ctx context.Context) {
	list, err := c.dyn.Resource(workloadsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		c.o.Log.Warn("list workloads", "err", err)
		return
	}
	for i := range list.Items {
		if check := c.pendingCheck(&list.Items[i]); check != "" {
			c.answer(ctx, &list.Items[i], check)
		}
	}
}

// answerFresh answers the check of a workload an informer event showed
// Pending, from the workload as it is now: by the time the worker gets to
// an event, Kueue may have evicted the workload and reset its checks (an
// answer then would hold or admit a reservation that no longer exists),
// or an earlier event of the same workload may have been answered.
func (c *Controller) answerFresh(ctx context.Context, u *unstructured.Unstructured) {
	fresh, err := c.dyn.Resource(workloadsGVR).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil {
		if ctx.Err() == nil && !apierrors.IsNotFound(err) {
			c.Stats.Errors.Add(1)
			c.o.Log.Warn("read a workload to answer its check", "workload", u.GetNamespace()+"/"+u.GetName(), "err", err)
		}
		return
	}
	if check := c.pendingCheck(fresh); check != "" {
		c.answer(ctx, fresh, check)
	}
}

// answer decides a workload's Pending budget check and writes it. It
// fails open: when the ledger cannot be read the workload is let through
// and the message says so.
func (c *Controller) answer(ctx context.Context, u *unstructured.Unstructured, check string) {
	t := c.currentTeams()
	cq, _, _ := unstructured.NestedString(u.Object, "status", "admission", "clusterQueue")
	team := t.Team(u.GetNamespace(), cq)
	d := demand(u)
	now := c.o.Now()
	var v Verdict
	mtd, err := c.monthToDate(ctx, t, team, now)
	if err != nil {
		c.Stats.ChecksFailedOpen.Add(1)
		v = Verdict{Ready: true, Message: fmt.Sprintf("gpuledger: budget not checked, let through: the ledger cannot be read (%v)", err)}
	} else {
		v = Budget(t, team, d, mtd, c.o.DefaultDuration, c.o.RetryAfter)
	}
	if v.Ready && c.o.FlavorTargets {
		if tv, err := c.flavorTargets(ctx, t, u); err != nil {
			c.Stats.Errors.Add(1)
			c.o.Log.Warn("flavor targets not checked, let through", "workload", u.GetNamespace()+"/"+u.GetName(), "err", err)
		} else if !tv.Ready {
			v = tv
		}
	}
	// Kueue requeues a Retry at lastTransitionTime + requeueAfterSeconds:
	// the time stamps are the wall clock's, whatever Now says.
	state := map[string]any{"name": check, "state": "Ready", "message": truncate(v.Message, 32768),
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if !v.Ready {
		state["state"] = "Retry"
		state["requeueAfterSeconds"] = int64(v.RetryAfter.Seconds())
	}
	patch := map[string]any{"apiVersion": kueueGroup + "/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": u.GetName(), "namespace": u.GetNamespace()},
		"status":   map[string]any{"admissionChecks": []any{state}}}
	if err := c.applyStatus(ctx, workloadsGVR, u.GetNamespace(), u.GetName(), patch); err != nil {
		c.Stats.Errors.Add(1)
		c.o.Log.Warn("write the budget check", "workload", u.GetNamespace()+"/"+u.GetName(), "err", err)
		return
	}
	if v.Ready {
		c.Stats.ChecksReady.Add(1)
		c.noteReady(u, time.Now())
	} else {
		c.Stats.ChecksHeld.Add(1)
	}
	c.o.Log.Info("budget check", "workload", u.GetNamespace()+"/"+u.GetName(), "team", team, "state", state["state"], "message", v.Message)
	if c.o.FlavorTargets {
		var released *unstructured.Unstructured
		if !v.Ready {
			released = u
		}
		c.updateDemotions(ctx, t, released)
	}
}

// demotedWeight is the fairSharing.weight of a demoted team's LocalQueues:
// a thousandth, so that Admission Fair Sharing, which orders LocalQueues
// by consumed usage over weight, tries the other teams' workloads first.
const demotedWeight = 0.001

// updateDemotions demotes the teams whose next workload Kueue would
// reserve only for the check to hold it (Demotions), and gives back their
// weights to those no longer so, after each answer. released is the
// workload just held (nil: none), which the informer may still show
// reserved.
func (c *Controller) updateDemotions(ctx context.Context, t *Teams, released *unstructured.Unstructured) {
	c.mu.Lock()
	list, f := c.workloads, c.flavors
	c.mu.Unlock()
	if list == nil || f.Nominal == nil {
		return
	}
	var skip func(*unstructured.Unstructured) bool
	if released != nil {
		skip = func(w *unstructured.Unstructured) bool {
			return w.GetNamespace() == released.GetNamespace() && w.GetName() == released.GetName()
		}
	}
	now := Demotions(t, f, list(), skip)
	c.updateMu.Lock()
	defer c.updateMu.Unlock()
	type change struct {
		key      string
		qw       *queueWeight
		from, to float64
		flavor   string
	}
	var changes []change
	c.mu.Lock()
	was := c.demoted
	c.demoted = now
	for key, qw := range c.weights {
		before, after := was[qw.team] != "", now[qw.team] != ""
		switch {
		case !before && after:
			changes = append(changes, change{key, qw, qw.weight, demotedWeight, now[qw.team]})
		case before && !after:
			changes = append(changes, change{key, qw, demotedWeight, qw.weight, ""})
		}
	}
	c.mu.Unlock()
	sort.Slice(changes, func(i, k int) bool { return changes[i].key < changes[k].key })
	for _, ch := range changes {
		ns, name, _ := strings.Cut(ch.key, "/")
		ref := corev1.ObjectReference{Kind: "LocalQueue", Namespace: ns, Name: name}
		// No Event: a demotion lasts from one answer to another, seconds
		// in a busy cluster; the log says why.
		if err := c.setWeight(ctx, localQueuesGVR, ref, ch.from, ch.to, "", ch.qw, "team", ch.qw.team, "demotedFor", ch.flavor); err != nil {
			c.Stats.Errors.Add(1)
			c.o.Log.Warn("demotion not written", "localQueue", ch.key, "err", err)
		}
	}
}

// flavorTargets reads the Kueue objects the targets need and decides.
func (c *Controller) flavorTargets(ctx context.Context, t *Teams, u *unstructured.Unstructured) (Verdict, error) {
	c.mu.Lock()
	list, f, at := c.workloads, c.flavors, c.flavorsAt
	c.mu.Unlock()
	if list == nil {
		return Verdict{Ready: true}, nil
	}
	if time.Since(at) > 5*time.Second {
		var objs [3][]unstructured.Unstructured
		for i, gvr := range []schema.GroupVersionResource{clusterQsGVR, resourceFlavorsGVR, localQueuesGVR} {
			l, err := c.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				return Verdict{}, fmt.Errorf("list %s: %w", gvr.Resource, err)
			}
			objs[i] = l.Items
		}
		f = ReadFlavors(objs[0], objs[1], objs[2])
		c.mu.Lock()
		c.flavors, c.flavorsAt = f, time.Now()
		c.mu.Unlock()
	}
	return FlavorTargets(t, f, u, list(), c.undecided, c.o.TargetRetryAfter), nil
}

// noteReady remembers that the worker answered u's check Ready at, and
// forgets answers the informer has long caught up with.
func (c *Controller) noteReady(u *unstructured.Unstructured, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, t := range c.answeredReady {
		if at.Sub(t) > time.Minute {
			delete(c.answeredReady, k)
		}
	}
	c.answeredReady[u.GetNamespace()+"/"+u.GetName()] = at
}

// undecided says whether one of our checks of workload w is Pending and
// the worker has not answered it Ready since w reserved its quota: its
// reservation is still to be decided, after the one being decided now.
func (c *Controller) undecided(w *unstructured.Unstructured) bool {
	reservedAt, _ := condition(w, "QuotaReserved")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ourPending(w) == "" {
		return false
	}
	// The condition's time is whole seconds: a Ready answered in the
	// second of the reservation or after it is this one's.
	at, ok := c.answeredReady[w.GetNamespace()+"/"+w.GetName()]
	return !ok || at.Truncate(time.Second).Before(reservedAt)
}

// storeLister lists an informer's Workloads.
func storeLister(s cache.Store) func() []*unstructured.Unstructured {
	return func() []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, o := range s.List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				out = append(out, u)
			}
		}
		return out
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// monthToDate is the team's cost so far this month in the ledger.
func (c *Controller) monthToDate(ctx context.Context, t *Teams, team string, now time.Time) (int64, error) {
	if team == "" {
		return 0, nil
	}
	rows, err := c.o.Store.Query(ctx, ledger.Query{From: ledger.StepMonth.Truncate(now), To: now.Truncate(time.Hour).Add(time.Hour), Step: ledger.StepMonth,
		GroupBy: []ledger.Dimension{ledger.DimTeam}, Cluster: t.Cluster, Team: team})
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, r := range rows {
		sum += r.CostMicros
	}
	return sum, nil
}

// demand reads what a workload asks for per flavor from its admission.
func demand(u *unstructured.Unstructured) Demand {
	d := Demand{GPUsByFlavor: map[string]float64{}}
	if s, ok, _ := unstructured.NestedInt64(u.Object, "spec", "maximumExecutionTimeSeconds"); ok {
		d.MaxDuration = time.Duration(s) * time.Second
	}
	assign, _, _ := unstructured.NestedSlice(u.Object, "status", "admission", "podSetAssignments")
	flavorOf := map[string]map[string]any{}
	for _, a := range assign {
		m, _ := a.(map[string]any)
		name, _ := m["name"].(string)
		f, _ := m["flavors"].(map[string]any)
		flavorOf[name] = f
	}
	eachGPURequest(u, func(podSet string, count int64, res string, q resource.Quantity) {
		share := 1.0
		if res != "nvidia.com/gpu" {
			share, _ = MIGShare(res)
		}
		flavor, _ := flavorOf[podSet][res].(string)
		d.GPUsByFlavor[flavor] += float64(count) * q.AsApproximateFloat64() * share
	})
	return d
}

// eachGPURequest calls fn for every GPU request (nvidia.com/gpu or a MIG
// resource) of every container of a Workload's pod sets, with the pod
// set's name and pod count.
func eachGPURequest(u *unstructured.Unstructured, fn func(podSet string, count int64, res string, q resource.Quantity)) {
	sets, _, _ := unstructured.NestedSlice(u.Object, "spec", "podSets")
	for _, s := range sets {
		m, _ := s.(map[string]any)
		name, _ := m["name"].(string)
		count, _ := m["count"].(int64)
		containers, _, _ := unstructured.NestedSlice(m, "template", "spec", "containers")
		for _, ct := range containers {
			req, _, _ := unstructured.NestedStringMap(ct.(map[string]any), "resources", "requests")
			for res, qty := range req {
				if _, mig := MIGShare(res); res != "nvidia.com/gpu" && !mig {
					continue
				}
				q, err := resource.ParseQuantity(qty)
				if err != nil {
					continue
				}
				fn(name, count, res, q)
			}
		}
	}
}

func (c *Controller) applyStatus(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, obj map[string]any) error {
	u := &unstructured.Unstructured{Object: obj}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	var err error
	if ns == "" {
		_, err = c.dyn.Resource(gvr).ApplyStatus(ctx, name, u, opts)
	} else {
		_, err = c.dyn.Resource(gvr).Namespace(ns).ApplyStatus(ctx, name, u, opts)
	}
	return err
}

// condition returns when condition typ became True, and whether it is.
func condition(u *unstructured.Unstructured, typ string) (time.Time, bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			s, _ := m["lastTransitionTime"].(string)
			at, _ := time.Parse(time.RFC3339, s)
			return at, true
		}
	}
	return time.Time{}, false
}
