package config

import (
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"github.com/gpuledger/gpuledger/attribution"
)

var (
	dnsLabel   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsName    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	currencyRe = regexp.MustCompile(`^[A-Z]{3}$`)
)

// ResourceGPU is the extended resource of a whole NVIDIA GPU.
const ResourceGPU = "nvidia.com/gpu"

// MIGResourcePrefix starts the extended resource of a MIG slice, as the
// NVIDIA device plugin's mixed strategy names it: nvidia.com/mig-3g.40gb.
const MIGResourcePrefix = "nvidia.com/mig-"

// validate checks everything the decoder could not: required fields, names,
// references between sections, and Kueue's quota rules. It records every
// problem in d.
func (c *Config) validate(d *decoder) {
	if c.Currency == "" {
		d.add(nil, "currency", "missing; want an ISO 4217 code such as USD")
	} else if !currencyRe.MatchString(c.Currency) {
		d.add(nil, "currency", "%q is not an ISO 4217 code; want three capital letters such as USD", c.Currency)
	}

	flavors := make(map[string]bool)
	for i, f := range c.ResourceFlavors {
		p := fmt.Sprintf("resourceFlavors[%d].name", i)
		checkName(d, p, f.Name, dnsName, "a DNS subdomain name such as h100-80gb")
		unique(d, flavors, p, "flavor %q is defined twice", f.Name)
	}
	flavorRef := func(p, name string) {
		if name == "" {
			d.add(nil, p, "missing; want one of the resourceFlavors (%s)", keys(flavors))
		} else if !flavors[name] {
			d.add(nil, p, "flavor %q is not defined; want one of the resourceFlavors (%s)", name, keys(flavors))
		}
	}

	if len(c.Clusters) == 0 {
		d.add(nil, "clusters", "missing; want at least one cluster with its nodes")
	}
	clusters := make(map[string]bool)
	usedFlavors := make(map[string]string)             // flavor → a path using it
	flavorProfiles := make(map[string]map[string]bool) // flavor → MIG profiles its nodes have
	for i, cl := range c.Clusters {
		p := fmt.Sprintf("clusters[%d]", i)
		checkName(d, p+".name", cl.Name, dnsName, "a DNS subdomain name such as gpu-prod-1")
		unique(d, clusters, p+".name", "cluster %q is defined twice", cl.Name)
		if len(cl.Nodes) == 0 {
			d.add(nil, p+".nodes", "missing; want the cluster's GPU nodes")
		}
		nodes := make(map[string]bool)
		for j, n := range cl.Nodes {
			np := fmt.Sprintf("%s.nodes[%d]", p, j)
			checkName(d, np+".name", n.Name, dnsName, "the node name, as dcgm-exporter's Hostname label reports it")
			if nodes[n.Name] {
				d.add(nil, np+".name", "node %q is listed twice in cluster %q", n.Name, cl.Name)
			}
			nodes[n.Name] = true
			info := attribution.GPUModel(n.GPUModel)
			switch {
			case n.GPUModel == "":
				d.add(nil, np+".gpuModel", "missing; want the NVML model name, such as NVIDIA H100 80GB HBM3")
			case !info.Known:
				d.warn(np+".gpuModel", "%q is not a GPU model gpuledger knows; MIG slices and power are guessed. Check it against dcgm-exporter's modelName label (such as NVIDIA H100 80GB HBM3)", n.GPUModel)
			}
			if n.GPUs <= 0 {
				d.add(nil, np+".gpus", "%d GPUs; want a count of at least 1", n.GPUs)
			}
			flavorRef(np+".flavor", n.Flavor)
			if n.Flavor != "" {
				if _, ok := usedFlavors[n.Flavor]; !ok {
					usedFlavors[n.Flavor] = np + ".flavor"
				}
			}
			if len(n.MIG) > 0 && info.Known && !info.MIG {
				d.add(nil, np+".mig", "a %s has no MIG; remove mig, or fix gpuModel (MIG GPUs: A30, A100, H100, H200, B200)", n.GPUModel)
			} else if len(n.MIG) > 0 {
				slices := attribution.MIGComputeSlices(n.GPUModel)
				used := 0
				for k, prof := range n.MIG {
					mp, err := attribution.ParseMIGProfile(prof)
					if err != nil {
						d.add(nil, fmt.Sprintf("%s.mig[%d]", np, k), "%v", err)
						continue
					}
					base, _, _ := strings.Cut(prof, "+")
					if info.Profiles != nil && !slicesContains(info.Profiles, base) {
						d.add(nil, fmt.Sprintf("%s.mig[%d]", np, k), "%q is not a MIG profile of the %s; want one of %s", prof, n.GPUModel, strings.Join(info.Profiles, ", "))
					}
					if n.Flavor != "" {
						if flavorProfiles[n.Flavor] == nil {
							flavorProfiles[n.Flavor] = make(map[string]bool)
						}
						flavorProfiles[n.Flavor][base] = true
					}
					used += mp.ComputeSlices
				}
				if used > slices {
					d.add(nil, np+".mig", "layout %s uses %d compute slices; a %s has %d", strings.Join(n.MIG, ","), used, n.GPUModel, slices)
				}
			}
			if sh := n.Sharing; sh != nil {
				sp := np + ".sharing"
				if len(n.MIG) > 0 {
					d.add(nil, sp, "sharing MIG instances is not supported; use either mig or sharing on a node")
				}
				switch sh.Strategy {
				case "time-slicing", "mps":
					if sh.Replicas < 2 {
						d.add(nil, sp+".replicas", "%d; want the replicas each GPU is advertised as, at least 2", sh.Replicas)
					}
					if sh.Split != "" && sh.Split != "even" && sh.Split != "request" {
						d.add(nil, sp+".split", "%q; want even or request", sh.Split)
					}
				case "fractional":
					if sh.Split != "" && sh.Split != "request" {
						d.add(nil, sp+".split", "%q; fractional GPUs split by request only", sh.Split)
					}
					if sh.Replicas != 0 && sh.Replicas != 1000 {
						d.add(nil, sp+".replicas", "%d; fractional GPUs are 1000 milli-GPUs, leave replicas out", sh.Replicas)
					}
				default:
					d.add(nil, sp+".strategy", "%q; want time-slicing, mps or fractional", sh.Strategy)
				}
			}
		}
	}

	cqs := make(map[string]bool)
	for i, cq := range c.ClusterQueues {
		p := fmt.Sprintf("clusterQueues[%d]", i)
		checkName(d, p+".name", cq.Name, dnsName, "a DNS subdomain name such as research")
		unique(d, cqs, p+".name", "ClusterQueue %q is defined twice", cq.Name)
		if cq.Cohort != "" {
			checkName(d, p+".cohort", cq.Cohort, dnsName, "a DNS subdomain name")
		}
		seenFlavor := make(map[string]bool)
		for j, fq := range cq.Flavors {
			fp := fmt.Sprintf("%s.flavors[%d]", p, j)
			flavorRef(fp+".name", fq.Name)
			if seenFlavor[fq.Name] {
				d.add(nil, fp+".name", "flavor %q is listed twice in ClusterQueue %q", fq.Name, cq.Name)
			}
			seenFlavor[fq.Name] = true
			for k, r := range fq.Resources {
				rp := fmt.Sprintf("%s.resources[%d]", fp, k)
				checkResource(d, rp+".name", r.Name)
				if prof, ok := strings.CutPrefix(r.Name, MIGResourcePrefix); ok && flavors[fq.Name] && !flavorProfiles[fq.Name][prof] {
					d.add(nil, rp+".name", "no node of flavor %q has MIG profile %s, so %q can never be used; fix the profile or the nodes' mig layouts", fq.Name, prof, r.Name)
				}
				if r.NominalQuota < 0 {
					d.add(nil, rp+".nominalQuota", "%d is negative; want a count of at least 0", r.NominalQuota)
				}
				if r.BorrowingLimit != nil {
					if cq.Cohort == "" {
						d.add(nil, rp+".borrowingLimit", "set on a ClusterQueue without a cohort; Kueue allows borrowingLimit only in a cohort")
					}
					if *r.BorrowingLimit < 0 {
						d.add(nil, rp+".borrowingLimit", "%d is negative; want a count of at least 0", *r.BorrowingLimit)
					}
				}
				if r.LendingLimit != nil {
					if cq.Cohort == "" {
						d.add(nil, rp+".lendingLimit", "set on a ClusterQueue without a cohort; Kueue allows lendingLimit only in a cohort")
					}
					if *r.LendingLimit < 0 || *r.LendingLimit > r.NominalQuota {
						d.add(nil, rp+".lendingLimit", "%d is outside 0..nominalQuota (%d); Kueue requires lendingLimit <= nominalQuota", *r.LendingLimit, r.NominalQuota)
					}
				}
			}
		}
	}
	cqRef := func(p, name string) {
		if name == "" {
			d.add(nil, p, "missing; want one of the clusterQueues (%s)", keys(cqs))
		} else if !cqs[name] {
			d.add(nil, p, "ClusterQueue %q is not defined; want one of the clusterQueues (%s)", name, keys(cqs))
		}
	}

	lqs := make(map[string]bool)
	for i, lq := range c.LocalQueues {
		p := fmt.Sprintf("localQueues[%d]", i)
		checkName(d, p+".namespace", lq.Namespace, dnsLabel, "a namespace name (DNS label)")
		checkName(d, p+".name", lq.Name, dnsName, "a DNS subdomain name")
		k := lq.Namespace + "/" + lq.Name
		unique(d, lqs, p+".name", "LocalQueue %q is defined twice", k)
		cqRef(p+".clusterQueue", lq.ClusterQueue)
	}

	teams := make(map[string]bool)
	cqOwner := make(map[string]string)
	nsOwner := make(map[string]string)
	for i, t := range c.Teams {
		p := fmt.Sprintf("teams[%d]", i)
		checkName(d, p+".name", t.Name, dnsLabel, "a DNS label such as ml-research")
		unique(d, teams, p+".name", "team %q is defined twice", t.Name)
		for j, cq := range t.ClusterQueues {
			cp := fmt.Sprintf("%s.clusterQueues[%d]", p, j)
			cqRef(cp, cq)
			if o, ok := cqOwner[cq]; ok && o != t.Name {
				d.add(nil, cp, "ClusterQueue %q is already owned by team %q; a ClusterQueue has one owner", cq, o)
			}
			cqOwner[cq] = t.Name
		}
		for j, ns := range t.Namespaces {
			np := fmt.Sprintf("%s.namespaces[%d]", p, j)
			checkName(d, np, ns, dnsLabel, "a namespace name (DNS label)")
			if o, ok := nsOwner[ns]; ok && o != t.Name {
				d.add(nil, np, "namespace %q is already owned by team %q; a namespace has one owner", ns, o)
			}
			nsOwner[ns] = t.Name
		}
		if t.MonthlyBudget.Micros < 0 {
			d.add(nil, p+".monthlyBudget", "%s is negative; want an amount of at least 0", t.MonthlyBudget)
		}
		if len(t.ClusterQueues) == 0 && len(t.Namespaces) == 0 {
			d.warn(p, "team %q owns no ClusterQueue and no namespace, so nothing is ever billed to it; give it clusterQueues or namespaces", t.Name)
		}
	}
	if len(c.Teams) == 0 {
		d.add(nil, "teams", "missing; want at least one team that owns ClusterQueues or namespaces")
	}
	// A ClusterQueue no team owns bills its pods by their namespaces'
	// owners; where a LocalQueue of it is in a namespace nobody owns
	// either, those pods' cost goes to _unowned.
	for i, cq := range c.ClusterQueues {
		if _, ok := cqOwner[cq.Name]; ok || cq.Name == "" {
			continue
		}
		var orphans []string
		for _, lq := range c.LocalQueues {
			if _, ok := nsOwner[lq.Namespace]; lq.ClusterQueue == cq.Name && !ok {
				orphans = append(orphans, lq.Namespace+"/"+lq.Name)
			}
		}
		switch {
		case len(orphans) > 0:
			d.warn(fmt.Sprintf("clusterQueues[%d]", i), "ClusterQueue %q is owned by no team, and its LocalQueue(s) %s are in namespaces no team owns: their pods bill _unowned; add it to a team's clusterQueues",
				cq.Name, strings.Join(orphans, ", "))
		case !slices.ContainsFunc(c.LocalQueues, func(lq LocalQueue) bool { return lq.ClusterQueue == cq.Name }):
			d.warn(fmt.Sprintf("clusterQueues[%d]", i), "ClusterQueue %q is owned by no team and no LocalQueue points to it: pods admitted through it bill their namespaces' teams, or _unowned; add it to a team's clusterQueues",
				cq.Name)
		}
	}

	priced := make(map[string]bool)
	c.rates = make(map[string]int64)
	for i, pr := range c.Prices {
		p := fmt.Sprintf("prices[%d]", i)
		flavorRef(p+".flavor", pr.Flavor)
		unique(d, priced, p+".flavor", "flavor %q is priced twice", pr.Flavor)
		if rate, ok := resolvePrice(d, p, pr, c.Currency); ok {
			c.rates[pr.Flavor] = rate
		}
	}
	if e := c.Energy; e != nil {
		if !e.PricePerKWh.Set || e.PricePerKWh.Micros < 0 {
			d.add(nil, "energy.pricePerKWh", "missing or negative; want the electricity price per kWh in %s, such as 0.12", c.Currency)
		}
		if e.PUE.Set && e.PUE.Micros < 1_000_000 {
			d.add(nil, "energy.pue", "%s is below 1; want a power usage effectiveness such as 1.3", e.PUE)
		}
	}
	if c.CostPolicy != nil {
		if _, ok := attribution.ParseUnallocatedPolicy(c.CostPolicy.Unallocated); !ok {
			d.add(nil, "costPolicy.unallocated", "%q is not a policy; want platform, quota or usage", c.CostPolicy.Unallocated)
		}
	}
	if cp := c.Capacity; cp != nil {
		if cp.PurchaseGPUs < 0 {
			d.add(nil, "capacity.purchaseGPUs", "%d is negative; want the GPUs an expansion buys, such as 72", cp.PurchaseGPUs)
		}
		if cp.Measure != "" && cp.Measure != "active" && cp.Measure != "allocated" {
			d.add(nil, "capacity.measure", "%q; want active (DCGM's busy time, the default) or allocated (what pods held)", cp.Measure)
		}
		if cp.UtilizationPercent < 0 || cp.UtilizationPercent > 100 {
			d.add(nil, "capacity.utilizationPercent", "%d is not a percentage; want 1-100, such as 80", cp.UtilizationPercent)
		}
		if cp.WindowDays < 0 {
			d.add(nil, "capacity.windowDays", "%d is negative; want the days the utilisation must hold, such as 30", cp.WindowDays)
		}
		if cp.WaitMinutes < 0 {
			d.add(nil, "capacity.waitMinutes", "%d is negative; want the wait for admission that calls for more GPUs, such as 30", cp.WaitMinutes)
		}
		if cp.WaitPercentile < 0 || cp.WaitPercentile > 100 {
			d.add(nil, "capacity.waitPercentile", "%d is not a percentile; want 1-100, such as 90", cp.WaitPercentile)
		}
		if cp.WaitWindowDays < 0 {
			d.add(nil, "capacity.waitWindowDays", "%d is negative; want the days the wait must last, such as 7", cp.WaitWindowDays)
		}
		if cp.ReclaimIdleMinutes < 0 {
			d.add(nil, "capacity.reclaimIdleMinutes", "%d is negative; want how long a workload's GPUs stay idle before a culling policy ends it, such as 60", cp.ReclaimIdleMinutes)
		}
		if cp.ColdStartSeconds < 0 {
			d.add(nil, "capacity.coldStartSeconds", "%d is negative; want a model's load time in seconds, such as 120", cp.ColdStartSeconds)
		}
		for _, m := range slices.Sorted(maps.Keys(cp.ColdStartModels)) {
			if s := cp.ColdStartModels[m]; s < 0 || m == "" {
				d.add(nil, "capacity.coldStartModels."+m, "%d: want a model_name and its load time in seconds, such as llama-3-8b: 30", s)
			}
		}
		if cp.ColdStartPenalty.Micros < 0 {
			d.add(nil, "capacity.coldStartPenalty", "%s is negative; want what a cold start costs, such as 0.50", cp.ColdStartPenalty)
		}
		classOf := map[string]string{}
		for i, c := range cp.SLAClasses {
			p := fmt.Sprintf("capacity.slaClasses[%d]", i)
			checkName(d, p+".name", c.Name, dnsLabel, "a DNS label such as interactive")
			if len(c.Namespaces) == 0 {
				d.add(nil, p+".namespaces", "is empty; want the namespaces of the class's endpoints")
			}
			for j, ns := range c.Namespaces {
				if other, dup := classOf[ns]; dup {
					d.add(nil, fmt.Sprintf("%s.namespaces[%d]", p, j), "%q is in class %s too; want each namespace in one class", ns, other)
				}
				classOf[ns] = c.Name
			}
			if c.ColdStartPenalty.Micros < 0 {
				d.add(nil, p+".coldStartPenalty", "%s is negative; want what a cold start costs, such as 2.00", c.ColdStartPenalty)
			}
			if c.MaxP95ExtraSeconds < -1 {
				d.add(nil, p+".maxP95ExtraSeconds", "%d; want the seconds the p95 request may wait for a load, 0 for none, -1 for no limit", c.MaxP95ExtraSeconds)
			}
		}
	}
	if c.Auth != nil {
		validateTokens(d, "auth.tokens", c.Auth.Tokens, teams, make(map[string]bool))
	}
	for f, where := range usedFlavors {
		if flavors[f] && !priced[f] {
			d.add(nil, where, "flavor %q has no price; add it under prices", f)
		}
	}
}

// unique records name in seen, and a problem at path when it was there
// already; msg formats the name.
// resolvePrice checks pr, at path p, and returns its price per GPU-hour in
// currency: given directly, from the price book (converted by its exchange
// rate), or amortised from owned hardware.
func resolvePrice(d *decoder, p string, pr Price, currency string) (int64, bool) {
	ways := 0
	for _, set := range []bool{pr.PerGPUHour.Set, pr.Catalog != "", pr.OnPrem != nil} {
		if set {
			ways++
		}
	}
	if ways != 1 {
		if !d.failed[p+".perGPUHour"] {
			d.add(nil, p, "%d of perGPUHour, catalog and onPrem are set; want exactly one, such as perGPUHour: 6.88", ways)
		}
		return 0, false
	}
	if pr.Spot && pr.Catalog == "" {
		d.add(nil, p+".spot", "spot applies to a catalog price only")
	}
	if pr.ExchangeRate.Set && pr.Catalog == "" {
		d.add(nil, p+".exchangeRate", "exchangeRate converts a catalog price only; give perGPUHour in %s", currency)
	}
	switch {
	case pr.PerGPUHour.Set:
		if pr.PerGPUHour.Micros < 0 {
			d.add(nil, p+".perGPUHour", "%s is negative; want a price of at least 0", pr.PerGPUHour)
		}
		return pr.PerGPUHour.Micros, pr.PerGPUHour.Micros >= 0
	case pr.Catalog != "":
		e, ok := Catalog()[pr.Catalog]
		rate := int64(1_000_000)
		switch {
		case pr.ExchangeRate.Set && pr.ExchangeRate.Micros <= 0:
			d.add(nil, p+".exchangeRate", "%s; want what one USD costs in %s, more than 0", pr.ExchangeRate, currency)
			ok = false
		case pr.ExchangeRate.Set:
			rate = pr.ExchangeRate.Micros
		case currency != "" && currency != CatalogCurrency:
			d.add(nil, p+".catalog", "the price book is in %s but currency is %s; set exchangeRate (what one %s costs in %s), or give perGPUHour in %s",
				CatalogCurrency, currency, CatalogCurrency, currency, currency)
			ok = false
		}
		switch {
		case !ok && !d.failed[p+".exchangeRate"] && !d.failed[p+".catalog"]:
			d.add(nil, p+".catalog", "%q is not in the price book; want one of %s", pr.Catalog, catalogKeys())
		case !ok:
		case pr.Spot && e.SpotMicros == 0:
			d.add(nil, p+".spot", "the price book has no spot price for %s", pr.Catalog)
		case pr.Spot:
			return convert(e.SpotMicros, rate), true
		default:
			return convert(e.OnDemandMicros, rate), true
		}
	default:
		o := pr.OnPrem
		op := p + ".onPrem"
		if o.PurchasePerGPU.Micros <= 0 {
			d.add(nil, op+".purchasePerGPU", "%s; want the price of one GPU, more than 0", o.PurchasePerGPU)
		}
		if o.DepreciationMonths <= 0 {
			d.add(nil, op+".depreciationMonths", "%d; want at least 1, such as 48", o.DepreciationMonths)
		}
		if o.PowerWattsPerGPU < 0 {
			d.add(nil, op+".powerWattsPerGPU", "%d is negative; want watts, such as 700", o.PowerWattsPerGPU)
		}
		if o.ElectricityPerKWh.Micros < 0 || o.OverheadPerGPUMonth.Micros < 0 {
			d.add(nil, op, "electricityPerKWh and overheadPerGPUMonth must not be negative")
		}
		if o.PUE.Set && o.PUE.Micros < 1_000_000 {
			d.add(nil, op+".pue", "%s is below 1; want a power usage effectiveness such as 1.3", o.PUE)
		}
		if o.PurchasePerGPU.Micros > 0 && o.DepreciationMonths > 0 {
			return o.RateMicros(), true
		}
	}
	return 0, false
}

func unique(d *decoder, seen map[string]bool, path, msg, name string) {
	if seen[name] {
		d.add(nil, path, msg, name)
	}
	seen[name] = true
}

func checkName(d *decoder, path, name string, re *regexp.Regexp, want string) {
	if name == "" {
		d.add(nil, path, "missing; want %s", want)
	} else if !re.MatchString(name) {
		d.add(nil, path, "%q is not valid; want %s", name, want)
	}
}

func checkResource(d *decoder, path, name string) {
	if name == ResourceGPU {
		return
	}
	if prof, ok := strings.CutPrefix(name, MIGResourcePrefix); ok {
		if _, err := attribution.ParseMIGProfile(prof); err != nil {
			d.add(nil, path, "%q names a bad MIG profile: %v", name, err)
		}
		return
	}
	d.add(nil, path, "%q is not a GPU resource; want %s or %s<profile> such as %s3g.40gb", name, ResourceGPU, MIGResourcePrefix, MIGResourcePrefix)
}

func keys(m map[string]bool) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sortStrings(ks)
	return strings.Join(ks, ", ")
}

func slicesContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// convert turns USD micro-units into the config's currency at rate (micro-
// units of the currency per USD), rounded half up to the micro.
func convert(usdMicros, rate int64) int64 {
	if rate == 1_000_000 {
		return usdMicros
	}
	n := new(big.Int).Mul(big.NewInt(usdMicros), big.NewInt(rate))
	n.Add(n, big.NewInt(500_000))
	return n.Quo(n, big.NewInt(1_000_000)).Int64()
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// validateTokens checks tokens: unique names, a hex SHA-256, known scopes
// (team:<name> of a configured team).
func validateTokens(d *decoder, path string, tokens []Token, teams, names map[string]bool) {
	for i, t := range tokens {
		p := fmt.Sprintf("%s[%d]", path, i)
		checkName(d, p+".name", t.Name, dnsLabel, "a DNS label such as vmagent or ml-dashboard")
		unique(d, names, p+".name", "token %q is defined twice", t.Name)
		if !hexSHA256.MatchString(t.SHA256) {
			d.add(nil, p+".sha256", "%q is not a SHA-256 in lowercase hex (64 characters); gpuledger token prints it", t.SHA256)
		}
		if len(t.Scopes) == 0 {
			d.add(nil, p+".scopes", "missing; want one or more of write, viewer, admin, team:<name>")
		}
		for j, sc := range t.Scopes {
			sp := fmt.Sprintf("%s.scopes[%d]", p, j)
			switch team, isTeam := strings.CutPrefix(sc, "team:"); {
			case sc == "write" || sc == "viewer" || sc == "admin":
			case isTeam && teams[team]:
			case isTeam:
				d.add(nil, sp, "team %q is not defined; want team:<one of the teams (%s)>", team, keys(teams))
			default:
				d.add(nil, sp, "%q is not a scope; want write, viewer, admin or team:<name>", sc)
			}
		}
	}
}
