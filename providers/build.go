package providers

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// ErrUnsupported marks a task a flavor cannot serve: a method, reCAPTCHA variant or param its table has no entry
// for. Such a task is never sent to that provider.
var ErrUnsupported = errors.New("not supported by this provider")

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
}

// buildTask maps an in.php method and params to the flavor's task object. Param values are never echoed in errors
// (a param may carry a token or an image).
func buildTask(f Flavor, method string, params map[string]string) (map[string]any, TaskSpec, error) {
	kind, err := KindOf(method, params)
	if err != nil {
		return nil, TaskSpec{}, fmt.Errorf("%s: %w", f, err)
	}
	spec, ok := TaskFor(f, kind)
	if !ok {
		return nil, TaskSpec{}, unsupported("%s has no task for method %s (%s)", f, method, kind)
	}
	task, err := spec.fill(method, params)
	if err != nil {
		return nil, TaskSpec{}, fmt.Errorf("%s, method %s (%s): %w", f, method, kind, err)
	}
	return task, spec, nil
}

// fill builds the task object from params: constants, then one field per param (in sorted order, so errors are
// stable), then defaults, then the required check.
func (s TaskSpec) fill(method string, params map[string]string) (map[string]any, error) {
	task := map[string]any{"type": s.Type}
	for _, k := range slices.Sorted(maps.Keys(s.Const)) {
		setPath(task, k, s.Const[k])
	}
	filledBy := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if isSelector(method, name) {
			continue
		}
		if err := s.fillParam(task, filledBy, method, name, params[name]); err != nil {
			return nil, err
		}
	}
	return task, s.finish(task, filledBy)
}

func (s TaskSpec) fillParam(task map[string]any, filledBy map[string]string, method, name, raw string) error {
	i := slices.IndexFunc(s.Fields, func(f Field) bool { return f.Param == name })
	if i < 0 {
		return unsupported("param %s: the provider's task has no field for it", name)
	}
	f := s.Fields[i]
	v, err := f.Enc(raw)
	if err != nil {
		return fmt.Errorf("params.%s: %w", name, err)
	}
	if v == nil {
		return nil
	}
	if other, dup := filledBy[f.Path]; dup {
		return fmt.Errorf("params.%s and params.%s both fill the task's %s: pass one", other, name, f.Path)
	}
	filledBy[f.Path] = name
	setPath(task, f.Path, v)
	return nil
}

// finish applies defaults and checks that every required field is there.
func (s TaskSpec) finish(task map[string]any, filledBy map[string]string) error {
	for _, f := range s.Fields {
		if _, done := filledBy[f.Path]; done || f.Default == "" {
			continue
		}
		v, err := f.Enc(f.Default)
		if err != nil {
			return fmt.Errorf("default of %s: %w", f.Path, err) // a table error; a test covers every default
		}
		filledBy[f.Path] = f.Param
		setPath(task, f.Path, v)
	}
	for _, f := range s.Fields {
		if _, done := filledBy[f.Path]; f.Required && !done {
			return fmt.Errorf("params.%s: required", f.Param)
		}
	}
	return nil
}

// setPath sets a dotted path in a JSON object, creating the objects on the way.
func setPath(obj map[string]any, path string, v any) {
	head, rest, nested := strings.Cut(path, ".")
	if !nested {
		obj[head] = v
		return
	}
	child, ok := obj[head].(map[string]any)
	if !ok {
		child = map[string]any{}
		obj[head] = child
	}
	setPath(child, rest, v)
}

// encoding turns an in.php param value into a task field value; nil means "leave the field out".
type encoding func(string) (any, error)

func encString(v string) (any, error) {
	if v == "" {
		return nil, nil
	}
	return v, nil
}

// orNil leaves a blank param out, else encodes it trimmed.
func orNil(enc func(string) (any, error)) encoding {
	return func(v string) (any, error) {
		if v = strings.TrimSpace(v); v == "" {
			return nil, nil
		}
		return enc(v)
	}
}

var encBool = orNil(func(v string) (any, error) { return flag(v) })

var encInt = orNil(func(v string) (any, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, errors.New("must be an integer")
	}
	return n, nil
})

var encFloat = orNil(func(v string) (any, error) {
	x, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return nil, errors.New("must be a number")
	}
	return json.Number(strconv.FormatFloat(x, 'f', -1, 64)), nil
})

// encImage re-encodes an image as the clean standard base64 createTask wants ("only clean base64!":
// https://anti-captcha.com/apidoc/task-types/ImageToTextTask), whatever form in.php accepted.
func encImage(v string) (any, error) {
	img, err := decodeImage(v)
	if err != nil {
		return nil, errors.New("is not valid base64 image data")
	}
	return base64.StdEncoding.EncodeToString(img), nil
}

// encHost turns in.php's URL (surl, api_server) into the bare host the task field wants.
func encHost(v string) (any, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	if !strings.Contains(v, "://") {
		v = "https://" + v
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return nil, errors.New("must be a host name or URL")
	}
	return u.Host, nil
}

// encBlob wraps in.php's data[blob] into the stringified {"blob": …} object the task's data field wants.
func encBlob(v string) (any, error) {
	if v == "" {
		return nil, nil
	}
	b, err := json.Marshal(map[string]string{"blob": v})
	return string(b), err
}
