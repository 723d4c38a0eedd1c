package api

import (
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"
)

// params parses the request's query strictly: a malformed query (such as
// one with ';' separators, which Go's parser drops with the pair around
// them), a parameter given twice, or one the route does not take is a 400
// naming it, so that no filter is ever dropped silently.
func params(c echo.Context, allowed ...string) (url.Values, error) {
	v, err := parseRawQuery(c.Request().URL.RawQuery)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for k, vals := range v {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
			continue
		}
		if len(vals) > 1 {
			return nil, badf("parameter %s is given %d times; give it once", k, len(vals))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, badf("unknown parameter(s) %s; this route takes %s", strings.Join(unknown, ", "), strings.Join(allowed, ", "))
	}
	return v, nil
}

// parseRawQuery parses a query string, refusing what Go's parser would
// take in part: a ';' (it drops the pair around it) or a bad escape. The
// answer cache keys on the same check, so that it never answers a query
// the route would refuse.
func parseRawQuery(raw string) (url.Values, error) {
	if strings.Contains(raw, ";") {
		return nil, badf("query %q contains ';'; separate parameters with '&' (a ';' would drop the parameters around it)", raw)
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badf("query %q is not a valid query string: %v", raw, err)
	}
	return v, nil
}
