package docker

import (
	"io/fs"
	"syscall"
)

func stampOf(fi fs.FileInfo) stamp {
	s := stamp{mode: fi.Mode(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino, s.ctime = st.Ino, st.Ctim.Nano()
	}
	return s
}
