//go:build !linux

package stagingfs

import "os"

func Usable() error                     { return ErrUnsupported }
func Format(*os.File, int64, int) error { return ErrUnsupported }
func Attach(*os.File) (*os.File, error) { return nil, ErrUnsupported }
func Mount(*os.File, string) error      { return ErrUnsupported }
func Fit(*os.File, int64) (int, error)  { return 0, ErrUnsupported }
func Release(*os.File) error            { return ErrUnsupported }
func UnmountBelow(string)               {}
func UnescapeMount(s string) string     { return s }

func NewImage(string) (*os.File, error) { return nil, ErrUnsupported }
func Sweep(string) int                  { return 0 }
func KeepTemplates(string)              {}
