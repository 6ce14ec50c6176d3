// Package wsperm decides the owner and mode of what a program's writes
// bring into a host workspace, the same way in every backend (the
// namespace backend's merge, the Docker and Kubernetes backends' copy
// back):
//
//   - The workspace directory itself keeps its owner, group and mode: a
//     program never changes them.
//   - An existing entry keeps its owner, group, ACL and extended
//     attributes. Its mode changes only where the program changed it, and
//     then within the mask below; a regular file whose content the
//     program changed loses its setuid and setgid bits, as the kernel
//     does on a write by anyone else than root.
//   - A new entry belongs to the workspace directory's owner, with the
//     workspace directory's group, or its parent directory's group where
//     that directory is setgid (a new directory there is setgid too, as
//     the kernel makes it).
//   - The mask: never setuid, setgid or sticky bits that the entry did not
//     have; no write permission for group or others unless the workspace
//     directory grants it to them, or the entry already had it.
//
// So a program can neither give anyone a uid or gid through a mode, nor
// open the user's project to other local users, nor make a file the user
// cannot change.
package wsperm

// Root is the workspace directory, as stat(2) describes it.
type Root struct {
	UID, GID int
	Mode     uint32 // st_mode's permission and special bits (0o7777)
}

// Mode bits.
const (
	setuid = 0o4000
	setgid = 0o2000
	sticky = 0o1000
	perm   = 0o777
	gwow   = 0o022 // group and other write
)

// NewRoot describes a workspace directory from its stat fields.
func NewRoot(uid, gid uint32, mode uint32) Root {
	return Root{UID: int(uid), GID: int(gid), Mode: mode & 0o7777}
}

// writeMask is the group and other write bits an entry may have: those the
// workspace directory grants, and those old (the entry's mode before the
// program, 0 for a new entry) already had.
func (r Root) writeMask(old uint32) uint32 { return (r.Mode | old) & gwow }

// NewMode is the mode of a new entry to which the program gave mode p,
// made in a directory of mode parent; dir says it is a directory.
func (r Root) NewMode(p uint32, dir bool, parent uint32) uint32 {
	m := p&perm&^gwow | p&r.writeMask(0)
	if dir && parent&setgid != 0 {
		m |= setgid
	}
	return m
}

// NewOwner is the owner and group of a new entry made in a directory of
// mode parent and group parentGID.
func (r Root) NewOwner(parent uint32, parentGID int) (uid, gid int) {
	if parent&setgid != 0 {
		return r.UID, parentGID
	}
	return r.UID, r.GID
}

// ChangedMode is the mode of an existing entry of mode old (0o7777 bits)
// after the program: p is the mode the program left it with, dir says it
// is a directory and written that the program changed a regular file's
// content. Where the program did not change the permission bits, old is
// kept. A directory keeps its setgid and sticky bits; a file the program
// wrote or changed the mode of loses its setuid and setgid bits.
func (r Root) ChangedMode(old, p uint32, dir, written bool) uint32 {
	old &= 0o7777
	special := old &^ perm
	same := p&perm == old&perm
	if !dir && (written || !same) {
		special &^= setuid | setgid
	}
	if same {
		return old&perm | special
	}
	return p&perm&^gwow | p&r.writeMask(old) | special
}
