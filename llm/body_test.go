package llm

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads body through an AnswerBody watcher, one byte per Read when
// oneByte is set (so that every UTF-8 sequence and line is cut).
func readAll(t *testing.T, b *AnswerBody, contentType, body string, oneByte bool) error {
	t.Helper()
	var r io.Reader = strings.NewReader(body)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {contentType}}, Body: io.NopCloser(r)}
	res, err := b.Wrap(res, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(res.Body)
	return err
}

func TestAnswerBodyUTF8(t *testing.T) {
	for _, c := range []struct {
		name    string
		body    string
		invalid bool
	}{
		{"ascii", `{"content":"print(1)"}`, false},
		{"multibyte", `{"content":"café ünïcødé 日本語 🙂"}`, false},
		{"encoded U+FFFD", "{\"content\":\"caf\uFFFD\"}", false},
		{"escaped U+FFFD", `{"content":"caf\ufffd"}`, false},
		{"latin-1 byte", "{\"content\":\"caf\xe9\"}", true},
		{"stray continuation", "{\"content\":\"a\x80b\"}", true},
		{"cut sequence", "{\"content\":\"\xe6\x97\"}", true},
	} {
		for _, oneByte := range []bool{false, true} {
			b := NewAnswerBody(testEP, 1<<20)
			if err := readAll(t, b, "application/json", c.body, oneByte); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if b.InvalidUTF8() != c.invalid {
				t.Errorf("%s (one byte per read: %v): invalid = %v, want %v", c.name, oneByte, b.InvalidUTF8(), c.invalid)
			}
		}
	}
}

func TestAnswerBodyStopsAtTheCap(t *testing.T) {
	b := NewAnswerBody(testEP, 1<<10)
	// An endless JSON body: the read must stop soon after the cap.
	r := io.MultiReader(strings.NewReader(`{"content":"`), endless('x'))
	res, _ := b.Wrap(&http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(r)}, nil)
	n, err := io.Copy(io.Discard, res.Body)
	if KindOf(err) != KindTooLarge || n > 1<<10*jsonBodyFactor+bodySlack+64<<10 {
		t.Fatalf("read %d bytes, err %v", n, err)
	}
	if !strings.Contains(err.Error(), "1 KiB") || !strings.Contains(err.Error(), "--max-answer") {
		t.Errorf("message: %v", err)
	}
	// A stream with one endless event stops at the event limit.
	b = NewAnswerBody(testEP, 1<<10)
	r = io.MultiReader(strings.NewReader("data: {\"x\":\""), endless('y'))
	res, _ = b.Wrap(&http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(r)}, nil)
	if n, err = io.Copy(io.Discard, res.Body); KindOf(err) != KindTooLarge || n > 1<<10*jsonBodyFactor+bodySlack+64<<10 {
		t.Fatalf("stream: read %d bytes, err %v", n, err)
	}
	// Many small events may add up to more than one event's limit.
	b = NewAnswerBody(testEP, 1<<10)
	ev := strings.Repeat("data: {\"choices\":[]}\n\n", 5000)
	if err := readAll(t, b, "text/event-stream", ev, false); err != nil {
		t.Errorf("small events: %v", err)
	}
}

func TestAnswerBodyDone(t *testing.T) {
	for _, c := range []struct {
		body string
		done bool
	}{
		{"data: {\"a\":1}\n\ndata: [DONE]\n\n", true},
		{"data: {\"a\":1}\r\n\r\ndata:[DONE]\r\n\r\n", true},
		{"data: {\"a\":1}\n\n", false},
		{"data: {\"content\":\"data: [DONE]\"}\n\n", false},
	} {
		for _, oneByte := range []bool{false, true} {
			b := NewAnswerBody(testEP, 1<<20)
			if err := readAll(t, b, "text/event-stream; charset=utf-8", c.body, oneByte); err != nil {
				t.Fatal(err)
			}
			if b.Done() != c.done {
				t.Errorf("%q: done = %v", c.body, b.Done())
			}
		}
	}
}

func TestReadErrorCountsWhatArrived(t *testing.T) {
	b := NewAnswerBody(testEP, 1<<20)
	r := io.MultiReader(strings.NewReader(`{"content":"half`), iotest.ErrReader(errors.New("unexpected EOF")))
	res, _ := b.Wrap(&http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(r)}, nil)
	_, err := io.ReadAll(res.Body)
	var re *ReadError
	if !errors.As(err, &re) || re.Received != 16 {
		t.Fatalf("err = %#v", err)
	}
}

// endless is an infinite reader of c.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	copy(p, bytes.Repeat([]byte{byte(e)}, len(p)))
	return len(p), nil
}
