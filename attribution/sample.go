package attribution

// Field says which DCGM quantity a Sample carries.
type Field uint8

// Fields attribution reads. Others are dropped by ingest before they get here.
const (
	FieldUnknown Field = iota
	// FieldGPUUtil is DCGM_FI_DEV_GPU_UTIL, percent 0-100. Not reported per
	// MIG instance.
	FieldGPUUtil
	// FieldGREngineActive is DCGM_FI_PROF_GR_ENGINE_ACTIVE, ratio 0-1; the
	// activity signal for MIG instances and preferred where present.
	FieldGREngineActive
	// FieldFBUsed is DCGM_FI_DEV_FB_USED, MiB.
	FieldFBUsed
	// FieldPowerUsage is DCGM_FI_DEV_POWER_USAGE, watts.
	FieldPowerUsage
	// FieldTotalEnergy is DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, a counter in
	// millijoules.
	FieldTotalEnergy
)

// Sample is one DCGM value for one GPU or MIG instance at one instant, with
// the pod that held the device when it was taken. Strings may alias a parse
// buffer: the Attributor copies what it keeps.
type Sample struct {
	// TimeMs is the sample time in Unix milliseconds.
	TimeMs int64
	// Node, GPU, Profile and Instance identify the device: dcgm-exporter's
	// Hostname, gpu, GPU_I_PROFILE and GPU_I_ID labels (the last two empty
	// for a whole GPU).
	Node, GPU, Profile, Instance string
	// Namespace and Pod of the holder; empty when no pod held the device.
	Namespace, Pod string
	// Queue is the pod's kueue.x-k8s.io/queue-name label when the exporter
	// carries pod labels; empty otherwise.
	Queue string
	// ExporterNamespace and ExporterPod name the exporter's own pod when the
	// series shows it apart from the holder: a scrape with honorLabels false
	// renames the holder's labels to exported_* and puts the exporter's in
	// namespace and pod. The Attributor learns from them that this pod is
	// an exporter, never a holder, so that the series of free GPUs, which
	// carry only the exporter's labels, are not charged to it.
	ExporterNamespace, ExporterPod string
	// Job is the scrape job the series came from (Prometheus' job label);
	// empty when not known. A job whose series once named the exporter
	// apart from the holder (ExporterPod) is scraped with honorLabels
	// false: in it, a series with no exported_* labels is a free device's,
	// its namespace and pod the exporter's own, whatever node it is on.
	Job string
	// DRA is set when the device was allocated through a DRA ResourceClaim
	// (dcgm-exporter's dra_* labels): such a pod has no GPU resource request
	// for kube-state-metrics to report.
	DRA   bool
	Field Field
	Value float64
}

// Phase is what kube_pod_status_phase says of a pod.
type Phase uint8

// Phases a PodInfo may carry. Only Running holds devices.
const (
	// PhaseUnknown: the PodInfo carries no phase.
	PhaseUnknown Phase = iota
	// PhaseRunning: kube_pod_status_phase{phase="Running"} is 1.
	PhaseRunning
	// PhaseNotRunning: kube_pod_status_phase{phase="Running"} is 0.
	PhaseNotRunning
)

// Resource kinds of a GPU request, as PodInfo.Kind names them.
const (
	// KindGPU is a whole GPU (nvidia.com/gpu), a replica of a shared GPU, or
	// a milli-GPU of a fractional one (such as alibabacloud.com/gpu_milli).
	KindGPU = "gpu"
	// KindMIGPrefix starts a MIG resource's kind: "mig-" and the profile as
	// kube-state-metrics sanitises it (nvidia.com/mig-3g.40gb is
	// nvidia_com_mig_3g_40gb, kind "mig-3g_40gb").
	KindMIGPrefix = "mig-"
)

// PodInfo is what kube-state-metrics says of a pod at one scrape. Only the
// fields set are recorded: kube_pod_labels gives Queue (and owner labels),
// kube_pod_owner gives OwnerKind and OwnerName,
// kube_pod_container_resource_requests gives one container's GPU request
// and the Node, kube_pod_info the Node, kube_pod_status_phase the Phase.
//
// Allocation comes from these facts: a pod that kube-state-metrics reports
// Running on a node with GPU requests held that many devices of the node,
// whether or not DCGM saw it (see Attributor).
type PodInfo struct {
	// TimeMs is the scrape time in Unix milliseconds.
	TimeMs         int64
	Namespace, Pod string
	// Queue is the kueue.x-k8s.io/queue-name label.
	Queue string
	// OwnerKind and OwnerName name the workload that owns the pod, such as
	// Job and train-0042.
	OwnerKind, OwnerName string
	// Node is the node the pod was scheduled to.
	Node string
	// Phase is the pod's phase, from kube_pod_status_phase.
	Phase Phase
	// Container, Kind and RequestMilli give one container's GPU request ×
	// 1000, in the units the device plugin advertises: a container asking
	// for one nvidia.com/gpu replica of a time-sliced GPU has 1000; one
	// asking for 300 units of a GPU shared as 1000 milli-GPU replicas has
	// 300,000; one asking for two nvidia.com/mig-1g.10gb has kind
	// "mig-1g_10gb" and 2000. RequestMilli 0 means the series carried no
	// request.
	Container    string
	Kind         string
	RequestMilli int64
}

// Reason is why a sample was not used.
type Reason string

// Reasons a sample is rejected. Each is counted in Stats.
const (
	ReasonUnknownGPU      Reason = "unknown_gpu"
	ReasonUnknownInstance Reason = "unknown_mig_instance"
	ReasonOutOfOrder      Reason = "out_of_order"
	ReasonDuplicate       Reason = "duplicate"
	ReasonLate            Reason = "late"
	ReasonBadValue        Reason = "bad_value"
	// ReasonTooManyHolders: a device reported more pods in one scrape, or
	// in one hour, than Options.MaxHolders: broken or hostile input.
	ReasonTooManyHolders Reason = "too_many_holders"
	// ReasonTooManyPods: a new pod while Options.MaxPods were tracked,
	// by binaries that refused it (they now forget older pods instead;
	// Stats.PodsForgotten). Kept for the counters of older snapshots.
	ReasonTooManyPods Reason = "too_many_pods"
)
