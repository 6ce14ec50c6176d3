package kubernetes

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	netv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/codeagent/codeagent/sandbox"
)

// Labels and annotations on everything the backend creates.
const (
	labelManaged = "app.kubernetes.io/managed-by" // "codeagent"
	labelSandbox = "codeagent.io/sandbox"         // "true" on sandbox Pods: the NetworkPolicy selects them
	labelPool    = "codeagent.io/pool"            // the backend's id
	annoOwner    = "codeagent.io/owner"           // host/boot id/pid/start time of the creating process
	annoPids     = "codeagent.io/pids-max"        // the pids limit, for runtimes that read it (scripts/kube-runc)
	managedBy    = "codeagent"
)

// Names of the objects shared by every backend of a namespace.
const (
	policyName   = "codeagent-sandbox-deny-all"
	accountsName = "codeagent-sandbox-accounts"
	container    = "sandbox"
)

// class is what a Pod fixes at creation: its limits and image.
type class struct {
	Memory    int64
	Processes int
	Disk      int64
	CPUs      float64
}

func classOf(lim sandbox.Limits) class {
	lim = lim.WithDefaults()
	return class{Memory: lim.Memory, Processes: lim.Processes, Disk: lim.Disk, CPUs: lim.CPUs}
}

func (c class) key() string {
	return fmt.Sprintf("m%d/p%d/d%d/c%g", c.Memory, c.Processes, c.Disk, c.CPUs)
}

// workspaceRoom is the room the workspace's emptyDir has besides Disk, for
// the staged copy of the workspace.
const workspaceRoom = 1 << 30

// podSpec is a sandbox Pod of class c that lives at most life: PID 1 is
// sleep, the lifeline, and the Pod's activeDeadlineSeconds the same.
func (b *Backend) podSpec(c class, life time.Duration) *corev1.Pod {
	secs := int64(math.Ceil(life.Seconds()))
	uid := int64(b.cfg.HostUID)
	yes, no := true, false
	cpuLimit := resource.NewMilliQuantity(int64(math.Ceil(c.CPUs*1000)), resource.DecimalSI)
	cpuRequest := resource.NewMilliQuantity(max(10, int64(math.Ceil(c.CPUs*100))), resource.DecimalSI)
	mem := resource.NewQuantity(c.Memory, resource.BinarySI)
	storage := resource.NewQuantity(c.Disk+workspaceRoom, resource.BinarySI)
	tmp := resource.NewQuantity(c.Disk, resource.BinarySI)
	code := resource.NewQuantity(64<<20, resource.BinarySI)
	rc, profile, _ := b.template()
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	if profile != SeccompRuntimeDefault {
		seccomp = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &profile}
	}
	var runtimeClass *string
	if rc != "" {
		runtimeClass = &rc
	}
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "codeagent-" + b.id + "-",
			Namespace:    b.cfg.Namespace,
			Labels:       map[string]string{labelManaged: managedBy, labelSandbox: "true", labelPool: b.id},
			Annotations:  map[string]string{annoOwner: b.owner, annoPids: strconv.Itoa(c.Processes)},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         &secs,
			TerminationGracePeriodSeconds: &zero,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			RuntimeClassName:              runtimeClass,
			DNSPolicy:                     corev1.DNSNone,
			DNSConfig:                     &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}},
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid, RunAsNonRoot: &yes, SeccompProfile: seccomp,
			},
			Containers: []corev1.Container{{
				Name:            container,
				Image:           b.cfg.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sleep", strconv.FormatInt(secs, 10)},
				WorkingDir:      sandbox.WorkspacePath,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					Privileged:               &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceMemory: *mem, corev1.ResourceCPU: *cpuLimit,
						corev1.ResourceEphemeralStorage: *storage},
					Requests: corev1.ResourceList{corev1.ResourceMemory: *mem, corev1.ResourceCPU: *cpuRequest,
						corev1.ResourceEphemeralStorage: *storage},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "workspace", MountPath: sandbox.WorkspacePath},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "code", MountPath: CodePath},
					{Name: "accounts", MountPath: "/etc/passwd", SubPath: "passwd", ReadOnly: true},
					{Name: "accounts", MountPath: "/etc/group", SubPath: "group", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: storage}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: tmp}}},
				{Name: "code", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: code}}},
				{Name: "accounts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: accountsName}}}},
			},
		},
	}
	if b.lease != nil {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
			Name: b.lease.Name, UID: b.lease.UID}}
	}
	return pod
}

// ensureShared creates the namespace's NetworkPolicy and accounts
// ConfigMap when they are missing. A policy that cannot be created is a
// warning (the cluster may manage policies itself); the ConfigMap is needed.
func (b *Backend) ensureShared(ctx context.Context) error {
	np := &netv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName, Labels: map[string]string{labelManaged: managedBy}},
		Spec: netv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelSandbox: "true"}},
			PolicyTypes: []netv1.PolicyType{netv1.PolicyTypeIngress, netv1.PolicyTypeEgress},
		},
	}
	if _, err := b.api.networkPolicies(b.cfg.Namespace).Get(ctx, policyName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := b.api.networkPolicies(b.cfg.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			b.log.Warn("kubernetes: create the deny-all NetworkPolicy", "err", err)
		}
	} else if err != nil {
		b.log.Warn("kubernetes: read the deny-all NetworkPolicy", "err", err)
	}
	u := strconv.Itoa(b.cfg.HostUID)
	want := map[string]string{
		"passwd": "root:x:0:0:root:/root:/bin/sh\nsandbox:x:" + u + ":" + u + ":sandbox:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":  "root:x:0:\nsandbox:x:" + u + ":\nnogroup:x:65534:\n",
	}
	cm, err := b.api.configMaps(b.cfg.Namespace).Get(ctx, accountsName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: accountsName, Labels: map[string]string{labelManaged: managedBy}}, Data: want}
		if _, err := b.api.configMaps(b.cfg.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ConfigMap %s: %w", accountsName, err)
		}
	case err != nil:
		return fmt.Errorf("read ConfigMap %s: %w", accountsName, err)
	case cm.Data["passwd"] != want["passwd"] || cm.Data["group"] != want["group"]:
		return fmt.Errorf("ConfigMap %s names another uid than %d: remove it or set the same uid", accountsName, b.cfg.HostUID)
	}
	return nil
}

// leaseDuration is how long a backend's Lease counts without renewal.
const leaseDuration = 30 * time.Second

// takeLease creates the backend's Lease, the owner of its Pods: renewed
// while the backend lives, and once expired, removed with its Pods by the
// next backend's sweep (and the Pods by the garbage collector).
func (b *Backend) takeLease(ctx context.Context) error {
	d := int32(leaseDuration.Seconds())
	now := metav1.NewMicroTime(time.Now())
	l := &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "codeagent-" + b.id, Labels: map[string]string{labelManaged: managedBy, labelPool: b.id},
			Annotations: map[string]string{annoOwner: b.owner}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &b.owner, LeaseDurationSeconds: &d, AcquireTime: &now, RenewTime: &now},
	}
	got, err := b.api.leases(b.cfg.Namespace).Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create Lease: %w", err)
	}
	b.lease = got
	return nil
}

// renewLease moves the Lease's renew time to now.
func (b *Backend) renewLease(ctx context.Context) error {
	now := metav1.NewMicroTime(time.Now())
	patch := fmt.Sprintf(`{"spec":{"renewTime":%q}}`, now.UTC().Format(metav1.RFC3339Micro))
	_, err := b.api.leases(b.cfg.Namespace).Patch(ctx, b.lease.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// expired reports whether l was not renewed within its duration (and a
// grace), so that its holder is taken for dead.
func expired(l coordv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return now.Sub(l.CreationTimestamp.Time) > 2*leaseDuration
	}
	return now.Sub(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second+10*time.Second
}

// sweep removes the Leases of dead backends with their Pods, and managed
// Pods whose Lease is gone. It returns how many Pods it removed.
func (b *Backend) sweep(ctx context.Context) (int, error) {
	leases, err := b.api.leases(b.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelManaged + "=" + managedBy})
	if err != nil {
		return 0, fmt.Errorf("list Leases: %w", err)
	}
	live, deadPool := map[string]bool{}, map[string]bool{}
	now := time.Now()
	var dead []string
	for _, l := range leases.Items {
		if expired(l, now) {
			dead = append(dead, l.Name)
			deadPool[l.Labels[labelPool]] = true
		} else {
			live[l.Labels[labelPool]] = true
		}
	}
	pods, err := b.api.pods(b.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelManaged + "=" + managedBy + "," + labelSandbox + "=true"})
	if err != nil {
		return 0, fmt.Errorf("list Pods: %w", err)
	}
	n := 0
	for _, p := range pods.Items {
		pool := p.Labels[labelPool]
		// A Pod without a live Lease: its backend died, or (when young and
		// without any Lease) it may be starting now.
		if live[pool] || !deadPool[pool] && now.Sub(p.CreationTimestamp.Time) < leaseDuration {
			continue
		}
		if err := b.deletePod(ctx, p.Name); err != nil {
			return n, err
		}
		n++
	}
	for _, name := range dead {
		if err := b.api.leases(b.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("delete Lease %s: %w", name, err)
		}
	}
	return n, nil
}

// deletePod deletes a Pod at once (no grace period).
func (b *Backend) deletePod(ctx context.Context, name string) error {
	zero := int64(0)
	bg := metav1.DeletePropagationBackground
	err := b.api.pods(b.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Pod %s: %w", name, err)
	}
	return nil
}

func metaDelete() metav1.DeleteOptions { return metav1.DeleteOptions{} }
