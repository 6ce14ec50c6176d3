package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ErrUnsafeWorkspace is wrapped by the error of CheckWorkspaceDir (and so
// of the backends' ResolveWorkspace, in sandbox/internal/backendkit) for a
// directory that must never be a workspace: a program is given its
// workspace read-write, so `--workdir ../../etc` would let it rewrite the
// host. It is a usage problem, and errors.Is also
// finds ErrInvalidSpec in it.
var ErrUnsafeWorkspace error = unsafeWorkspace{}

type unsafeWorkspace struct{}

func (unsafeWorkspace) Error() string { return "unsafe directory" }
func (unsafeWorkspace) Unwrap() error { return ErrInvalidSpec }

// systemTrees are refused with everything below them: the host's own files,
// and the backends' directories.
var systemTrees = []string{"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/boot", "/proc", "/sys", "/dev", "/run/codeagent", "/var/tmp/codeagent"}

// backendTrees are the systemTrees that are the backends' own.
var backendTrees = map[string]bool{"/run/codeagent": true, "/var/tmp/codeagent": true}

// systemParents are refused themselves only: they hold other users' or
// services' directories, and a project directory below them is fine.
var systemParents = []string{"/var", "/var/lib", "/home", "/root", "/tmp", "/var/tmp", "/run", "/srv",
	"/opt", "/mnt", "/media"}

// CheckWorkspaceDir refuses a link-free absolute directory (as
// ResolveDir returns it) that is the root, inside a system tree
// (/etc, /usr, ...), one of the directories that hold others (/home, /tmp,
// /var/lib, ...), or the home directory itself of the user running
// codeagent or of any account in /etc/passwd (`sudo codeagent` in a
// user's home). A directory below a home or below /tmp is fine.
func CheckWorkspaceDir(resolved string) error {
	d := filepath.Clean(resolved)
	if d == "/" {
		return unsafef("/ is the root of the host's file system: programs would be given every file on it; give a directory made for the project, such as ~/projects/NAME")
	}
	for _, s := range systemTrees {
		if d != s && !strings.HasPrefix(d, s+"/") {
			continue
		}
		what, harm := "a system directory", "the host's own files"
		if backendTrees[s] {
			what, harm = "where codeagent's sandboxes keep their own files", "what other sandboxes run with"
		}
		where := d + " is " + what
		if d != s {
			where = fmt.Sprintf("%s is inside %s, %s", d, s, what)
		}
		return unsafef("%s: programs could change %s; give a directory made for the project, such as ~/projects/NAME", where, harm)
	}
	if who, ok := homeOf(d); ok {
		return unsafef("%s is the home directory of %s: programs would reach all of its files (keys, shell start-up files); give a project directory below it, such as %s", d, who, filepath.Join(d, "NAME"))
	}
	for _, s := range systemParents {
		if d == s {
			return unsafef("%s is a system directory that holds others: programs would reach all of them (other projects, users or services); give a directory made for the project below it, such as %s", d, filepath.Join(d, "NAME"))
		}
	}
	return nil
}

func unsafef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsafeWorkspace, fmt.Sprintf(format, a...))
}

// homeOf reports whether dir is a home directory, and whose.
func homeOf(dir string) (string, bool) {
	own := map[string]string{}
	add := func(home, who string) {
		if home != "" && filepath.IsAbs(home) {
			own[filepath.Clean(home)] = who
		}
	}
	add(os.Getenv("HOME"), "the user running codeagent ($HOME)")
	if h, err := os.UserHomeDir(); err == nil {
		add(h, "the user running codeagent")
	}
	if u, err := user.Current(); err == nil {
		add(u.HomeDir, u.Username)
	}
	if name, home := sudoHome(); home != "" {
		add(home, name)
	}
	for h, who := range own {
		if h == dir || resolvesTo(h, dir) {
			return who, true
		}
	}
	for _, h := range passwdHomes() {
		if h.dir == dir || h.resolved == dir {
			return h.user, true
		}
	}
	return "", false
}

// sudoHome is the home of the user who ran codeagent through sudo, looked
// up once (the account may be known to NSS only, not to /etc/passwd).
var sudoHome = sync.OnceValues(func() (string, string) {
	if name := os.Getenv("SUDO_USER"); name != "" {
		if u, err := user.Lookup(name); err == nil {
			return u.Username, u.HomeDir
		}
	}
	return "", ""
})

// resolvesTo reports whether path, with its links followed, is dir.
func resolvesTo(path, dir string) bool {
	r, err := filepath.EvalSymlinks(path)
	return err == nil && r == dir
}

type passwdHome struct{ user, dir, resolved string }

// passwdFile lists the accounts whose homes are refused (a variable for
// tests).
var passwdFile = "/etc/passwd"

// passwdCache holds passwdFile's homes, read again when the file changes.
var passwdCache struct {
	sync.Mutex
	file  string
	key   [4]int64 // device, inode, size, modification time
	homes []passwdHome
}

// passwdHomes returns the home directories of passwdFile's accounts, as
// written and with their links followed.
func passwdHomes() []passwdHome {
	file := passwdFile
	fi, err := os.Stat(file)
	if err != nil {
		return nil
	}
	var key [4]int64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		key = [4]int64{int64(st.Dev), int64(st.Ino), fi.Size(), fi.ModTime().UnixNano()}
	}
	passwdCache.Lock()
	defer passwdCache.Unlock()
	if passwdCache.homes != nil && file == passwdCache.file && key == passwdCache.key {
		return passwdCache.homes
	}
	homes, err := readPasswdHomes(file)
	if err != nil {
		return nil
	}
	passwdCache.file, passwdCache.key, passwdCache.homes = file, key, homes
	return homes
}

func readPasswdHomes(file string) ([]passwdHome, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	homes := []passwdHome{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 7 || !filepath.IsAbs(fields[5]) {
			continue
		}
		h := passwdHome{user: fields[0], dir: filepath.Clean(fields[5])}
		h.resolved = h.dir
		if r, err := filepath.EvalSymlinks(h.dir); err == nil {
			h.resolved = r
		}
		homes = append(homes, h)
	}
	return homes, sc.Err()
}
