package config

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// Bounds on what parsing a configuration sent over the network may cost.
//
// HCL's parser keeps every token of its input, and builds a syntax tree
// and diagnostics from them: about 450 bytes per token (a 272 KB file of
// 1,000 queues is 46,000 tokens and peaks at 21 MB), and 1 MiB of "a=1"
// lines took 1 GB. It recurses once per nested block, bracket, template
// and unary or conditional operator, with no limit of its own, so a body
// of "[" or "-" grows the stack without bound. A body the HTTP API parses
// is therefore scanned first, in one pass that allocates nothing, and
// refused when it nests deeper than MaxBodyNesting or holds more tokens
// than its limit; what parsing it may then cost is bounded by its tokens,
// whatever their arrangement.
const (
	// MaxBodyNesting bounds how deeply a body nests: blocks, brackets,
	// template sequences and runs of unary or conditional operators
	// together. A queue tree at its deepest (16 levels, each two deep in
	// JSON) with resource objects stays well under it.
	MaxBodyNesting = 48
	// MaxQueueConfigTokens bounds the tokens of a queue configuration in
	// HCL: more than the 46,000 of a file of 1,000 queues with six
	// settings each. HCL's JSON parser keeps about four times as much per
	// value, so MaxQueueConfigJSONValues bounds the values of one in JSON
	// (about 500 such queues). A larger configuration goes through the
	// command line (weft queue apply), which parses it where it runs.
	MaxQueueConfigTokens     = 64_000
	MaxQueueConfigJSONValues = 16_000
)

func errNotUTF8(name string) error {
	return fmt.Errorf("%s: not UTF-8 text; nothing was parsed", name)
}

// QueueConfigBodyCost bounds what reading a queue configuration body of n
// bytes costs (ParseQueueConfigBody): its bytes, and what parsing its
// tokens allocates, under 1 KiB per HCL token and 4 KiB per JSON value
// (TestBodyCostBoundsWhatParsingAllocates). A body has at most n+1 of
// either, and at most MaxQueueConfigTokens (64 MiB worth) or
// MaxQueueConfigJSONValues (the same) get parsed.
func QueueConfigBodyCost(n int64) int64 { return n + min((n+1)<<12, 64<<20) }

// AppSpecBodyCost bounds what reading an app spec body of n bytes costs
// (ParseAppSpecBody): its bytes, and what decoding and checking it
// allocates, at most 16 times its size for a body MaxAppSpecValues admits
// (TestBodyCostBoundsWhatParsingAllocates).
func AppSpecBodyCost(n int64) int64 { return 17*n + 64<<10 }

// hclFrame is what a byte of HCL native syntax is inside.
type hclFrame uint8

const (
	frameBracket hclFrame = iota // ( or [: newlines do not end an expression
	frameBrace                   // { of a block or an object
	frameInterp                  // ${ or %{ of a template
	frameString                  // "..."
	frameHeredoc                 // <<MARKER ... MARKER
)

// bodyScan is the state of one scan. The nesting of frames is at most
// MaxBodyNesting deep, so it lives in an array: the scan allocates nothing.
type bodyScan struct {
	src    []byte
	name   string
	tokens int
	frames [MaxBodyNesting + 1]struct {
		kind hclFrame
		ops  int // unary and conditional operators pending outside it
	}
	depth int
	// ops counts the unary and conditional operators of the expression
	// being read, pendingOps those of the expressions around it; each
	// nests the parser one call deeper until its expression ends.
	ops, pendingOps int
	marker          []byte // the heredoc's closing marker, when in one
}

// nesting is how deep the parser would be at this point.
func (s *bodyScan) nesting() int { return s.depth + s.pendingOps + s.ops }

func (s *bodyScan) errAt(i int, format string, a ...any) error {
	line, col := 1, 1
	for _, c := range s.src[:i] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("%s:%d,%d: %s", s.name, line, col, fmt.Sprintf(format, a...))
}

func (s *bodyScan) push(i int, kind hclFrame) error {
	if s.depth == MaxBodyNesting {
		return s.errAt(i, "nested more than %d deep (blocks, brackets, templates and operators); nothing was parsed", MaxBodyNesting)
	}
	f := &s.frames[s.depth]
	f.kind, f.ops = kind, s.ops
	s.pendingOps += s.ops
	s.ops = 0
	s.depth++
	return nil
}

func (s *bodyScan) pop() {
	s.depth--
	f := s.frames[s.depth]
	s.pendingOps -= f.ops
	s.ops = f.ops
}

func (s *bodyScan) top() (hclFrame, bool) {
	if s.depth == 0 {
		return frameBrace, false
	}
	return s.frames[s.depth-1].kind, true
}

// CheckHCLBody scans src, HCL native syntax, as a body the API will parse
// (named name in errors): it refuses one that nests deeper than
// MaxBodyNesting or has more than maxTokens tokens. It counts at least
// the tokens HCL's lexer makes, and nests at least as deep as its parser.
func CheckHCLBody(name string, src []byte, maxTokens int) error {
	tokens, err := scanHCL(name, src)
	if err != nil {
		return err
	}
	if tokens > maxTokens {
		return fmt.Errorf("%s: %d tokens; at most %d are read (nothing was parsed)", name, tokens, maxTokens)
	}
	return nil
}

// scanHCL counts src's tokens and checks its nesting.
func scanHCL(name string, src []byte) (int, error) {
	if !utf8.Valid(src) {
		return 0, errNotUTF8(name)
	}
	s := &bodyScan{src: src, name: name}
	err := s.scanHCL()
	return s.tokens, err
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func (s *bodyScan) scanHCL() error {
	src := s.src
	s.tokens = 1 // the end of the file
	// inIdent is true within a name (which may hold "-") or a number
	// (which may not: "1-2" is a subtraction).
	inIdent, inNumber, afterNumber := false, false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		kind, nested := s.top()
		if nested && (kind == frameString || kind == frameHeredoc) {
			var err error
			if i, err = s.scanTemplate(i, kind); err != nil {
				return err
			}
			inIdent, inNumber = false, false
			continue
		}
		if c >= 0x80 {
			// A byte outside ASCII: of a letter, or a token of its own,
			// after which another starts.
			s.tokens += 2
			inIdent, inNumber = false, false
			continue
		}
		if isIdentByte(c) || c == '-' && inIdent && !afterNumber {
			digit := c >= '0' && c <= '9'
			if inNumber && !digit {
				// "00A" is a number and a name, and "1e5-2" a number,
				// a minus and a number: count a token, and let no "-"
				// join what follows.
				inNumber, afterNumber = false, true
			}
			if !inIdent && !inNumber {
				s.tokens++
				inNumber, inIdent = digit, !digit
			}
			continue
		}
		afterNumber = false
		inIdent, inNumber = false, false
		switch {
		case c == ' ' || c == '\t':
		case c == '\n':
			s.tokens++
			if kind == frameBrace {
				s.ops = 0 // an attribute, or an object's item, ends
			}
		case c == '#' || c == '/' && i+1 < len(src) && src[i+1] == '/':
			s.tokens++
			for i+1 < len(src) && src[i+1] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			s.tokens++
			end := bytes.Index(src[i+2:], []byte("*/"))
			if end < 0 {
				s.tokens += len(src) - i // not a comment: at most a token a byte
				return nil
			}
			i += end + 3
		case c == '"':
			s.tokens++
			if err := s.push(i, frameString); err != nil {
				return err
			}
		case c == '<' && i+1 < len(src) && src[i+1] == '<' && s.heredocStart(i):
			s.tokens++
			if !s.heredocEnds(i) {
				s.tokens += len(src) - i // not a heredoc: at most a token a byte
				return nil
			}
			if err := s.push(i, frameHeredoc); err != nil {
				return err
			}
			i += bytes.IndexByte(src[i:], '\n')
		case c == '(' || c == '[':
			s.tokens++
			if err := s.push(i, frameBracket); err != nil {
				return err
			}
		case c == '{':
			s.tokens++
			if err := s.push(i, frameBrace); err != nil {
				return err
			}
		case c == ')' || c == ']':
			s.tokens++
			if nested && kind == frameBracket {
				s.pop()
			}
		case c == '}':
			// As HCL's lexer does, a brace closes the innermost brace or
			// template sequence, whatever brackets are left open in it.
			s.tokens++
			for nested && kind == frameBracket {
				s.pop()
				kind, nested = s.top()
			}
			if nested {
				s.pop()
			}
		case c == ',':
			s.tokens++
			s.ops = 0
		case c == '-' || c == '!' || c == '?':
			s.tokens++
			s.ops++
			if s.nesting() > MaxBodyNesting {
				return s.errAt(i, "nested more than %d deep (blocks, brackets, templates and operators); nothing was parsed", MaxBodyNesting)
			}
		default:
			s.tokens++
		}
	}
	return nil
}

// heredocStart reports whether src[i:] opens a heredoc (<<ID or <<-ID,
// then the end of the line), and remembers its marker.
func (s *bodyScan) heredocStart(i int) bool {
	j := i + 2
	if j < len(s.src) && s.src[j] == '-' {
		j++
	}
	start := j
	if j < len(s.src) && s.src[j] >= '0' && s.src[j] <= '9' {
		return false // a marker is a name
	}
	for j < len(s.src) && (isIdentByte(s.src[j]) || j > start && s.src[j] == '-') {
		j++
	}
	end := j
	if j < len(s.src) && s.src[j] == '\r' {
		j++
	}
	if end == start || j >= len(s.src) || s.src[j] != '\n' {
		return false
	}
	s.marker = s.src[start:end]
	return true
}

// heredocEnds reports whether a line after the heredoc opened at src[i]
// closes it.
func (s *bodyScan) heredocEnds(i int) bool {
	for rest := s.src[i:]; ; {
		n := bytes.IndexByte(rest, '\n')
		if n < 0 {
			return false
		}
		rest = rest[n+1:]
		line := rest
		if n := bytes.IndexByte(line, '\n'); n >= 0 {
			line = line[:n]
		}
		if s.closesHeredoc(line) {
			return true
		}
	}
}

// closesHeredoc reports whether a line closes the heredoc being read.
func (s *bodyScan) closesHeredoc(line []byte) bool {
	return bytes.Equal(bytes.TrimSuffix(bytes.TrimLeft(line, " \t"), []byte("\r")), s.marker)
}

// scanTemplate reads one step of a quoted string or a heredoc from src[i]
// and returns the index of the last byte it read.
func (s *bodyScan) scanTemplate(i int, kind hclFrame) (int, error) {
	src := s.src
	if kind == frameHeredoc && (i == 0 || src[i-1] == '\n') {
		line := src[i:]
		if n := bytes.IndexByte(line, '\n'); n >= 0 {
			line = line[:n]
		}
		if s.closesHeredoc(line) {
			s.tokens++
			s.pop()
			// What follows the marker on its line is read as code.
			return i + bytes.Index(line, s.marker) + len(s.marker) - 1, nil
		}
	}
	c := src[i]
	switch {
	case c == '\\' && kind == frameString:
		s.tokens += 2 // an escape, as a lone $, at the worst
		if i+1 < len(src) && (src[i+1] == '"' || src[i+1] == '\\') {
			return i + 1, nil // the quote or backslash it escapes
		}
	case c == '"' && kind == frameString:
		s.tokens++
		s.pop()
	case c == '\n':
		s.tokens++
	case (c == '$' || c == '%') && i+2 < len(src) && src[i+1] == c && src[i+2] == '{':
		s.tokens += 2 // $${ and %%{ are literals of their own, and one follows
		return i + 2, nil
	case (c == '$' || c == '%') && i+1 < len(src) && src[i+1] == '{':
		s.tokens += 2 // the literal before it, and the sequence
		return i + 1, s.push(i, frameInterp)
	case c == '$' || c == '%' || c >= 0x80 || c < ' ':
		// A lone $ or %, a control character, and (counted per byte) a
		// character outside ASCII may be tokens of their own, and a
		// literal follows.
		s.tokens += 2
	default:
		if i == 0 || src[i-1] == '"' || src[i-1] == '}' || src[i-1] == '\n' {
			s.tokens++ // a literal starts
		}
	}
	return i, nil
}

// CheckJSONBody scans src, JSON, as a body the API will parse (named name
// in errors): it refuses one that nests deeper than MaxBodyNesting or has
// more than maxValues values (object keys count), and, since HCL reads
// JSON strings as templates, one whose string holds a template sequence
// and more than MaxBodyNesting brackets and operators.
func CheckJSONBody(name string, src []byte, maxValues int) error {
	if !utf8.Valid(src) {
		return errNotUTF8(name)
	}
	s := &bodyScan{src: src, name: name}
	values := 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '{' || c == '[':
			values++
			if err := s.push(i, frameBrace); err != nil {
				return err
			}
		case c == '}' || c == ']':
			if s.depth > 0 {
				s.pop()
			}
		case c == '"':
			values++
			end, err := s.jsonString(i)
			if err != nil {
				return err
			}
			i = end
		case c >= '0' && c <= '9' || c == '-' || c >= 'a' && c <= 'z':
			values++
			for i+1 < len(src) && (isIdentByte(src[i+1]) || src[i+1] == '.' || src[i+1] == '+' || src[i+1] == '-') {
				i++
			}
		}
	}
	if values > maxValues {
		return fmt.Errorf("%s: %d JSON values; at most %d are read (nothing was parsed)", name, values, maxValues)
	}
	return nil
}

// jsonString skips the string that opens at src[i] and returns the index
// of its closing quote (or the last byte).
func (s *bodyScan) jsonString(i int) (int, error) {
	src := s.src
	template, nest := false, 0
	for j := i + 1; j < len(src); j++ {
		switch c := src[j]; {
		case c == '\\':
			j++
		case c == '"':
			return j, nil
		case (c == '$' || c == '%') && j+1 < len(src) && src[j+1] == '{':
			template = true
			nest++
		case c == '(' || c == '[' || c == '{' || c == '-' || c == '!' || c == '?':
			nest++
		}
		if template && nest > MaxBodyNesting {
			return 0, s.errAt(j, "a string holds a template with more than %d brackets and operators; nothing was parsed", MaxBodyNesting)
		}
	}
	return len(src) - 1, nil
}
