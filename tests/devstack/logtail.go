package devstack

import (
	"bytes"
	"io"
	"os"
)

// tailReadLimit bounds how much of a log TailFile reads: enough for a screenful of lines.
const tailReadLimit = 64 << 10

// TailFile returns the last n lines of the file at path, or a note saying why it could not be read.
func TailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(log unavailable: " + err.Error() + ")"
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "(log unavailable: " + err.Error() + ")"
	}
	offset := max(info.Size()-tailReadLimit, 0)
	buf, err := io.ReadAll(io.NewSectionReader(f, offset, info.Size()-offset))
	if err != nil {
		return "(log unavailable: " + err.Error() + ")"
	}
	return string(lastLines(buf, n))
}

func lastLines(buf []byte, n int) []byte {
	buf = bytes.TrimRight(buf, "\n")
	if n <= 0 {
		return nil
	}
	end := len(buf)
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(buf[:end], '\n')
		if j < 0 {
			return buf
		}
		end = j
	}
	return buf[end+1:]
}
