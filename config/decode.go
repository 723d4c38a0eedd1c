package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpuledger/gpuledger/ledger"
)

// Problem is one thing wrong with a config file, at a position.
type Problem struct {
	Line, Column int
	// Path is the field, such as clusterQueues[1].flavors[0].name.
	Path string
	Msg  string
}

// Error lists every problem found in one config file.
type Error struct {
	File     string
	Problems []Problem
}

// Error formats one problem a line, as file:line:column: path: message.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problem(s):", e.File, len(e.Problems))
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  %s", p.Format(e.File))
	}
	return b.String()
}

// Format writes the problem as file:line:column: path: message.
func (p Problem) Format(file string) string {
	return fmt.Sprintf("%s:%d:%d: %s: %s", file, p.Line, p.Column, p.Path, p.Msg)
}

// yamlLine finds the line yaml.v3 names in a syntax error ("yaml: line 3:
// did not find expected key"); it gives no column.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Load reads and checks the config file at path. On any problem it returns
// an *Error listing all of them.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w; pass an existing file with -config (see examples/)", err)
	}
	return Parse(data, path)
}

// Parse checks data, the contents of file. On any problem it returns an
// *Error listing all of them, sorted by position.
func Parse(data []byte, file string) (*Config, error) {
	var c Config
	d, err := decodeFile(data, file, &c, "the file is empty; want a mapping with clusters, resourceFlavors, clusterQueues, localQueues, teams and prices")
	if err != nil {
		return nil, err
	}
	c.validate(d)
	if err := d.err(file); err != nil {
		return nil, err
	}
	c.Warnings = d.warnings
	return &c, nil
}

// err sorts the problems and warnings found by position and returns the
// problems as an *Error, or nil when there are none.
func (d *decoder) err(file string) error {
	byPosition := func(ps []Problem) {
		sort.SliceStable(ps, func(i, j int) bool {
			a, b := ps[i], ps[j]
			if a.Line != b.Line {
				return a.Line < b.Line
			}
			return a.Column < b.Column
		})
	}
	byPosition(d.problems)
	byPosition(d.warnings)
	if len(d.problems) > 0 {
		return &Error{File: file, Problems: d.problems}
	}
	return nil
}

// decodeFile parses data, the contents of file, strictly into dst (a
// pointer to a struct) and returns the decoder holding the problems found;
// YAML that does not parse is an *Error at the line yaml.v3 names.
func decodeFile(data []byte, file string, dst any, emptyMsg string) (*decoder, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		p := Problem{Line: 1, Column: 1, Path: "(file)", Msg: "not valid YAML: " + err.Error()}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			if strings.HasPrefix(m[2], "did not find expected") {
				// yaml.v3 numbers its parser's errors from 0, its
				// scanner's from 1.
				p.Line++
			}
			p.Msg = "not valid YAML: " + m[2] + "; check the indentation, quotes and brackets on or just before this line"
		}
		return nil, &Error{File: file, Problems: []Problem{p}}
	}
	d := &decoder{pos: make(map[string]*yaml.Node), failed: make(map[string]bool)}
	if len(root.Content) == 0 {
		d.add(&root, "(file)", "%s", emptyMsg)
	} else {
		d.decode(root.Content[0], reflect.ValueOf(dst).Elem(), "")
	}
	return d, nil
}

type decoder struct {
	problems []Problem
	warnings []Problem
	pos      map[string]*yaml.Node
	// failed marks the paths with a problem already, so that a value that
	// could not be decoded is not reported again as missing or zero.
	failed map[string]bool
}

// add records a problem at node n (or, when n is nil, at the nearest
// ancestor of path that has a position).
func (d *decoder) add(n *yaml.Node, path, format string, args ...any) {
	if d.failed[path] {
		return
	}
	d.failed[path] = true
	if n == nil {
		n = d.nodeFor(path)
	}
	p := Problem{Path: path, Msg: fmt.Sprintf(format, args...), Line: 1, Column: 1}
	if n != nil && n.Line > 0 {
		p.Line, p.Column = n.Line, n.Column
	}
	d.problems = append(d.problems, p)
}

// warn records a doubtful value at path: not an error, reported beside.
func (d *decoder) warn(path, format string, args ...any) {
	p := Problem{Path: path, Msg: fmt.Sprintf(format, args...), Line: 1, Column: 1}
	if n := d.nodeFor(path); n != nil && n.Line > 0 {
		p.Line, p.Column = n.Line, n.Column
	}
	d.warnings = append(d.warnings, p)
}

func (d *decoder) nodeFor(path string) *yaml.Node {
	for path != "" {
		if n := d.pos[path]; n != nil {
			return n
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return d.pos[""]
}

var moneyType = reflect.TypeFor[Money]()

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	d.pos[path] = n
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if v.Type() == moneyType {
		if n.Kind != yaml.ScalarNode {
			d.add(n, path, "%s is not an amount; want a decimal such as 12.50", kindName(n))
			return
		}
		m, err := ledger.ParseMicros(n.Value)
		if err != nil {
			d.add(n, path, "%v", err)
			return
		}
		v.Set(reflect.ValueOf(Money{Micros: m, Set: true}))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.add(n, path, "%s is not a mapping; want fields %s", kindName(n), strings.Join(fieldNames(v.Type()), ", "))
			return
		}
		seen := make(map[string]bool)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			fp := join(path, k.Value)
			if seen[k.Value] {
				d.add(k, fp, "field %q is given twice", k.Value)
				continue
			}
			seen[k.Value] = true
			f, ok := fieldByTag(v, k.Value)
			if !ok {
				d.add(k, fp, "unknown field %q; want one of %s", k.Value, strings.Join(fieldNames(v.Type()), ", "))
				continue
			}
			d.pos[fp] = k
			d.decode(val, f, fp)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.add(n, path, "%s is not a list; want a list", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			d.decode(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.add(n, path, "%s is not a mapping; want key: value pairs", kindName(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := reflect.New(v.Type().Key()).Elem()
			d.decode(n.Content[i], k, path)
			e := reflect.New(v.Type().Elem()).Elem()
			d.decode(n.Content[i+1], e, join(path, n.Content[i].Value))
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.add(n, path, "%s is not a string; want a string", kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || (n.Value != "true" && n.Value != "false") {
			d.add(n, path, "%s is not a boolean; want true or false", kindName(n))
			return
		}
		v.SetBool(n.Value == "true")
	case reflect.Int:
		if n.Kind != yaml.ScalarNode {
			d.add(n, path, "%s is not an integer; want a whole number", kindName(n))
			return
		}
		i, err := strconv.Atoi(n.Value)
		if err != nil {
			d.add(n, path, "%q is not an integer; want a whole number", n.Value)
			return
		}
		v.SetInt(int64(i))
	default:
		panic(fmt.Sprintf("config: no decoder for %s", v.Type()))
	}
}

func fieldByTag(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		// An empty key ("": or an anchor with no key) matches no field: the
		// untagged fields are unexported state, not input.
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag == name && tag != "" && tag != "-" && t.Field(i).IsExported() {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			names = append(names, tag)
		}
	}
	return names
}

// TokenFile is a file of API tokens, such as a Kubernetes Secret mounted
// into the pod: the same shape as the configuration's auth section.
type TokenFile struct {
	Tokens []Token `yaml:"tokens"`
}

// LoadTokens reads and checks a token file against cfg's teams; token
// names must not repeat the configuration's.
func LoadTokens(path string, cfg *Config) ([]Token, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w; pass an existing file with -auth.tokensFile", err)
	}
	var tf TokenFile
	d, err := decodeFile(data, path, &tf, "the file is empty; want tokens: [{name, sha256, scopes}]")
	if err != nil {
		return nil, err
	}
	teams := make(map[string]bool, len(cfg.Teams))
	for _, t := range cfg.Teams {
		teams[t.Name] = true
	}
	names := make(map[string]bool)
	if cfg.Auth != nil {
		for _, t := range cfg.Auth.Tokens {
			names[t.Name] = true
		}
	}
	validateTokens(d, "tokens", tf.Tokens, teams, names)
	if len(d.problems) > 0 {
		return nil, &Error{File: path, Problems: d.problems}
	}
	return tf.Tokens, nil
}

// AllTokens are the configuration's tokens and, when path is not empty,
// those of the token file at path (LoadTokens).
func (c *Config) AllTokens(path string) ([]Token, error) {
	var toks []Token
	if c.Auth != nil {
		toks = append(toks, c.Auth.Tokens...)
	}
	if path != "" {
		more, err := LoadTokens(path, c)
		if err != nil {
			return nil, err
		}
		toks = append(toks, more...)
	}
	return toks, nil
}
