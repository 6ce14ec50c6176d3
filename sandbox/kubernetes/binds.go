package kubernetes

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/wsperm"
)

// A spec's binds (sandbox.Spec.Binds: dependency environments) reach its
// Pod as copies: the node has no host directories of codeagent's. Each
// bind is an emptyDir mounted read-only in the sandbox container at the
// bind's path, and writable only in a second container, the stager, that
// runs nothing but sleep; codeagent fills the volumes through the exec API
// (tar in the stager) before the program's streams open. The program's
// mount is read-only by the kernel, as with the other backends. A Pod with
// binds is made for its spec and deleted after it, never pooled.

// stager is the container that fills the bind volumes.
const stager = "stager"

// bindSizes are the room each bind's volume needs: its files and
// directories rounded to whole blocks, as the kubelet counts them.
func bindSizes(binds []sandbox.Bind) ([]int64, error) {
	sizes := make([]int64, len(binds))
	for i, bd := range binds {
		err := walkTree(bd.Source, func(rel string, fi fs.FileInfo, _ *os.Root) error {
			sizes[i] += 4096 + (fi.Size()+4095)/4096*4096
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("bind %s: %w", bd.Path, err)
		}
	}
	return sizes, nil
}

// withBinds adds to pod one volume per bind, read-only in the sandbox
// container, and the stager that fills them, whose writable mounts are
// below /stage.
func withBinds(pod *corev1.Pod, binds []sandbox.Bind, sizes []int64) {
	spec := &pod.Spec
	main := &spec.Containers[0]
	st := *main.DeepCopy()
	st.Name = stager
	st.WorkingDir = "/"
	st.VolumeMounts = nil
	var total int64
	for i, bd := range binds {
		name := "bind-" + strconv.Itoa(i)
		size := resource.NewQuantity(sizes[i]+(1<<20), resource.BinarySI)
		total += size.Value()
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: size}}})
		main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: bd.Path, ReadOnly: true})
		st.VolumeMounts = append(st.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: stagePath(i)})
	}
	mem := resource.MustParse("64Mi")
	cpu := resource.MustParse("100m")
	storage := resource.NewQuantity(total, resource.BinarySI)
	st.Resources = corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: mem, corev1.ResourceCPU: cpu, corev1.ResourceEphemeralStorage: *storage},
		Requests: corev1.ResourceList{corev1.ResourceMemory: mem, corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceEphemeralStorage: *storage},
	}
	spec.Containers = append(spec.Containers, st)
}

func stagePath(i int) string { return "/stage/" + strconv.Itoa(i) }

// stageBinds copies each bind's tree into its volume, through tar in the
// stager.
func (b *Backend) stageBinds(ctx context.Context, pod string, binds []sandbox.Bind) error {
	for i, bd := range binds {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeTar(pw, bd.Source)) }()
		var stderr sandbox.CappedBuffer
		stderr.Cap = 4 << 10
		err := b.streamIn(ctx, pod, stager, []string{"tar", "-x", "--no-same-owner", "-C", stagePath(i), "-f", "-"}, pr, io.Discard, &stderr)
		pr.Close()
		if err != nil {
			return fmt.Errorf("copy %s into the Pod: %w: %s", bd.Path, err, stderr.Bytes())
		}
	}
	return nil
}

// writeTar writes the tree at src to w as a tar archive: directories,
// regular files and links as links, read without
// following a link and without crossing into file systems mounted below.
func writeTar(w io.Writer, src string) error {
	tw := tar.NewWriter(w)
	err := walkTree(src, func(rel string, fi fs.FileInfo, root *os.Root) error {
		// Modes are readable by all, executable as the source is: the
		// volume is read-only to the program anyway, and tar in the stager
		// may not chmod (the setgid bit the Pod's fsGroup gives
		// directories is one seccomp refuses).
		hdr := &tar.Header{Name: rel, Mode: 0o644, ModTime: fi.ModTime(), Format: tar.FormatPAX}
		if fi.Mode().Perm()&0o111 != 0 {
			hdr.Mode = 0o755
		}
		switch {
		case fi.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, rel+"/", 0o755
			return tw.WriteHeader(hdr)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(rel)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
			return tw.WriteHeader(hdr)
		}
		f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("%s changed while it was read", rel)
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if n, err := io.Copy(tw, io.LimitReader(f, st.Size())); err != nil || n != st.Size() {
			return fmt.Errorf("%s changed while it was read (%d of %d bytes): %v", rel, n, st.Size(), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// walkTree calls fn for every directory, regular file and link below src
// (opened without following links, through os.Root), in lexical order;
// other kinds, and file systems mounted below src, are left out. It
// walks a workspace to stage it, and a bind's source to copy it.
func walkTree(src string, fn func(rel string, fi fs.FileInfo, root *os.Root) error) error {
	root, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer root.Close()
	_, rs, err := wsperm.RootOf(root)
	if err != nil {
		return err
	}
	return fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || rel == "." {
			return err
		}
		fi, err := root.Lstat(rel)
		if err != nil {
			return err
		}
		if st, ok := wsperm.StatOf(fi); ok && st.Dev != rs.Dev {
			if fi.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
			return nil
		}
		return fn(rel, fi, root)
	})
}
