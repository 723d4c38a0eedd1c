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
	Field Field
	Value float64
}

// PodInfo is what kube-state-metrics says of a pod. Only the fields set are
// recorded: kube_pod_labels gives Queue (and owner labels), kube_pod_owner
// gives OwnerKind and OwnerName, kube_pod_container_resource_requests gives
// one container's GPU request.
type PodInfo struct {
	Namespace, Pod string
	// Queue is the kueue.x-k8s.io/queue-name label.
	Queue string
	// OwnerKind and OwnerName name the workload that owns the pod, such as
	// Job and train-0042.
	OwnerKind, OwnerName string
	// Container and RequestMilli give one container's GPU request × 1000,
	// in the units the device plugin advertises: a container asking for one
	// nvidia.com/gpu replica of a time-sliced GPU has 1000; one asking for
	// 300 units of a GPU shared as 1000 milli-GPU replicas has 300,000.
	// RequestMilli 0 means the series carried no request.
	Container    string
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
)
