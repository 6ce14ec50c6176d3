//go:build linux && (amd64 || arm64)

package namespace

import (
	"golang.org/x/sys/unix"
	"os"

	"github.com/codeagent/codeagent/sandbox"
)

// pipes are the descriptors shared with bwrap: the seccomp program, the
// info report, the block pipe that holds the sandbox until it is confined,
// and one pipe per read-only data file.
type pipes struct {
	seccompR, seccompW *os.File
	infoR, infoW       *os.File
	blockR, blockW     *os.File
	workspace          *os.File
	dataR, dataW       []*os.File
}

func newPipes(workspace string, nfiles int) (*pipes, error) {
	p := &pipes{}
	ws, err := os.OpenFile(workspace, os.O_RDONLY|unix.O_DIRECTORY|unix.O_PATH, 0)
	if err != nil {
		return nil, err
	}
	p.workspace = ws
	mk := func(r, w **os.File) {
		if err == nil {
			*r, *w, err = os.Pipe()
		}
	}
	mk(&p.seccompR, &p.seccompW)
	mk(&p.infoR, &p.infoW)
	mk(&p.blockR, &p.blockW)
	p.dataR = make([]*os.File, nfiles)
	p.dataW = make([]*os.File, nfiles)
	for i := range nfiles {
		mk(&p.dataR[i], &p.dataW[i])
	}
	if err != nil {
		p.closeAll()
		return nil, err
	}
	return p, nil
}

// childFiles are passed as descriptors 3, 4, 5, 6...
func (p *pipes) childFiles() []*os.File {
	return append([]*os.File{p.seccompR, p.infoW, p.blockR, p.workspace}, p.dataR...)
}

// closeChildEnds drops this process's copies of the child's ends, so that
// EOF on info means bwrap is done with it.
func (p *pipes) closeChildEnds() {
	for _, f := range p.childFiles() {
		_ = f.Close()
	}
}

// feed writes the seccomp program and file contents; bwrap reads them during
// setup. Writes fail harmlessly if bwrap died.
func (p *pipes) feed(seccomp []byte, files []sandbox.File) {
	_, _ = p.seccompW.Write(seccomp)
	_ = p.seccompW.Close()
	for i, f := range files {
		_, _ = p.dataW[i].Write(f.Data)
		_ = p.dataW[i].Close()
	}
}

func (p *pipes) closeAll() {
	for _, f := range append(append([]*os.File{p.seccompR, p.seccompW, p.infoR, p.infoW, p.blockR, p.blockW}, p.dataR...), p.dataW...) {
		if f != nil {
			_ = f.Close()
		}
	}
}
