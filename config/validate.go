package config

import (
	"fmt"
	"regexp"
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
	usedFlavors := make(map[string]string) // flavor → a path using it
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
			if n.GPUModel == "" {
				d.add(nil, np+".gpuModel", "missing; want the NVML model name, such as NVIDIA H100 80GB HBM3")
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
			if len(n.MIG) > 0 {
				slices := attribution.MIGComputeSlices(n.GPUModel)
				used := 0
				for k, prof := range n.MIG {
					mp, err := attribution.ParseMIGProfile(prof)
					if err != nil {
						d.add(nil, fmt.Sprintf("%s.mig[%d]", np, k), "%v", err)
						continue
					}
					used += mp.ComputeSlices
				}
				if used > slices {
					d.add(nil, np+".mig", "layout %s uses %d compute slices; a %s has %d", strings.Join(n.MIG, ","), used, n.GPUModel, slices)
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
	}
	if len(c.Teams) == 0 {
		d.add(nil, "teams", "missing; want at least one team that owns ClusterQueues or namespaces")
	}

	priced := make(map[string]bool)
	for i, pr := range c.Prices {
		p := fmt.Sprintf("prices[%d]", i)
		flavorRef(p+".flavor", pr.Flavor)
		unique(d, priced, p+".flavor", "flavor %q is priced twice", pr.Flavor)
		if !pr.PerGPUHour.Set {
			d.add(nil, p+".perGPUHour", "missing; want the price of one GPU-hour in %s, such as 6.88", c.Currency)
		} else if pr.PerGPUHour.Micros < 0 {
			d.add(nil, p+".perGPUHour", "%s is negative; want a price of at least 0", pr.PerGPUHour)
		}
	}
	for f, where := range usedFlavors {
		if flavors[f] && !priced[f] {
			d.add(nil, where, "flavor %q has no price; add it under prices", f)
		}
	}
}

// unique records name in seen, and a problem at path when it was there
// already; msg formats the name.
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
