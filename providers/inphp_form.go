package providers

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
)

// methodPost is the in.php method that uploads the image as a multipart file.
const methodPost = "post"

// submitBody is an encoded in.php request body.
type submitBody struct {
	contentType string
	data        []byte
}

// encodeSubmit builds the in.php POST body. The API key travels in the body,
// never in the URL, so it cannot leak through URL-printing errors or logs.
func encodeSubmit(apiKey, method string, params map[string]string, pingback string) (submitBody, error) {
	if strings.TrimSpace(method) == "" {
		return submitBody{}, errors.New("method is required")
	}
	fields := url.Values{"key": {apiKey}, "method": {method}, "json": {"1"}, "pingback": {pingback}}
	// A param may not override a field the client sets: that would silently change the account, the answer
	// format or where the provider calls back. The set is derived from fields, so it cannot drift from it.
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if _, ok := params[name]; ok {
			return submitBody{}, fmt.Errorf("param %q is set by the client and must not be passed", name)
		}
	}
	if pingback == "" {
		fields.Del("pingback")
	}
	if method == methodPost {
		return encodeMultipart(fields, params)
	}
	for name, value := range params {
		fields.Set(name, value)
	}
	return submitBody{
		contentType: "application/x-www-form-urlencoded",
		data:        []byte(fields.Encode()),
	}, nil
}

// encodeMultipart sends params["file"] (base64) as the file upload the
// method=post API expects, and every other field as a form value.
func encodeMultipart(fields url.Values, params map[string]string) (submitBody, error) {
	encoded, ok := params["file"]
	if !ok || strings.TrimSpace(encoded) == "" {
		return submitBody{}, errors.New(`method "post" needs params["file"] with the base64 image`)
	}
	image, err := decodeImage(encoded)
	if err != nil {
		return submitBody{}, err
	}
	for name, value := range params {
		if name != "file" {
			fields.Set(name, value)
		}
	}

	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(fields)) { // sorted: a deterministic body
		if err := w.WriteField(name, fields.Get(name)); err != nil {
			return submitBody{}, fmt.Errorf("encode multipart field: %w", err)
		}
	}
	contentType, fileName := imageFileType(image)
	header := make(textproto.MIMEHeader)
	header.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, fileName))
	header.Set("Content-Type", contentType)
	part, err := w.CreatePart(header)
	if err != nil {
		return submitBody{}, fmt.Errorf("encode multipart file: %w", err)
	}
	if _, err := part.Write(image); err != nil {
		return submitBody{}, fmt.Errorf("encode multipart file: %w", err)
	}
	if err := w.Close(); err != nil {
		return submitBody{}, fmt.Errorf("encode multipart: %w", err)
	}
	return submitBody{contentType: w.FormDataContentType(), data: buf.Bytes()}, nil
}

// decodeImage accepts standard or URL-safe base64, padded or not, with an
// optional data: URI prefix, since callers pass whatever their page gave them.
func decodeImage(encoded string) ([]byte, error) {
	s := strings.TrimSpace(encoded)
	if strings.HasPrefix(s, "data:") {
		if i := strings.Index(s, ","); i >= 0 {
			s = s[i+1:]
		}
	}
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	s = strings.TrimRight(s, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if image, err := enc.DecodeString(s); err == nil {
			if len(image) == 0 {
				break
			}
			return image, nil
		}
	}
	return nil, errors.New(`params["file"] is not valid base64 image data`)
}

// imageFileType picks the part's content type and a file name whose extension
// matches it: the provider rejects unknown extensions (ERROR_WRONG_FILE_EXTENSION).
func imageFileType(image []byte) (contentType, fileName string) {
	switch ct := http.DetectContentType(image); ct {
	case "image/jpeg":
		return ct, "captcha.jpg"
	case "image/gif":
		return ct, "captcha.gif"
	case "image/png":
		return ct, "captcha.png"
	default:
		// Let the provider judge the bytes; a supported extension keeps the
		// rejection (if any) about the content, not the name.
		return "application/octet-stream", "captcha.png"
	}
}
