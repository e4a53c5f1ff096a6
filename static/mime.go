package static

import (
	"mime"
	"path"
	"strings"
)

// types maps the extensions a website serves most to their media types, so
// that the answer does not depend on the host's /etc/mime.types. Others go
// to mime.TypeByExtension, then to sniffing.
var types = map[string]string{
	".html":        "text/html; charset=utf-8",
	".htm":         "text/html; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".mjs":         "text/javascript; charset=utf-8",
	".txt":         "text/plain; charset=utf-8",
	".md":          "text/markdown; charset=utf-8",
	".csv":         "text/csv; charset=utf-8",
	".xml":         "application/xml",
	".json":        "application/json",
	".map":         "application/json",
	".webmanifest": "application/manifest+json",
	".atom":        "application/atom+xml",
	".rss":         "application/rss+xml",
	".wasm":        "application/wasm",
	".pdf":         "application/pdf",
	".zip":         "application/zip",
	".gz":          "application/gzip",
	".zst":         "application/zstd",
	".svg":         "image/svg+xml",
	".png":         "image/png",
	".jpg":         "image/jpeg",
	".jpeg":        "image/jpeg",
	".gif":         "image/gif",
	".webp":        "image/webp",
	".avif":        "image/avif",
	".ico":         "image/vnd.microsoft.icon",
	".woff":        "font/woff",
	".woff2":       "font/woff2",
	".ttf":         "font/ttf",
	".otf":         "font/otf",
	".mp4":         "video/mp4",
	".webm":        "video/webm",
	".mp3":         "audio/mpeg",
	".ogg":         "audio/ogg",
	".opus":        "audio/ogg",
	".flac":        "audio/flac",
}

// compressed lists the extensions of formats that are compressed already;
// no precompressed sibling is looked for, which saves three lookups per
// image, font or video.
var compressed = map[string]bool{
	".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true, ".avif": true,
	".woff": true, ".woff2": true, ".mp4": true, ".webm": true, ".mp3": true, ".ogg": true,
	".opus": true, ".flac": true, ".zip": true, ".gz": true, ".zst": true, ".br": true,
}

// isCompressed reports whether name's extension is of a compressed format.
func isCompressed(name string) bool {
	return compressed[strings.ToLower(path.Ext(name))]
}

// typeByName returns the media type for a file name from its extension, or
// "" when unknown. Text types get charset=utf-8 if they name no charset.
func typeByName(name string) string {
	ext := path.Ext(name)
	if ext == "" {
		return ""
	}
	if t, ok := types[strings.ToLower(ext)]; ok {
		return t
	}
	return withCharset(mime.TypeByExtension(ext))
}

// withCharset adds charset=utf-8 to a text/* type that has no charset.
func withCharset(t string) string {
	if strings.HasPrefix(t, "text/") && !strings.Contains(strings.ToLower(t), "charset=") {
		return t + "; charset=utf-8"
	}
	return t
}
