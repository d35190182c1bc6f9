package netlab

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Cut cuts every link between a node of side and a node of other, both
// ways: packets between them are dropped, silently, until Heal. Links
// already cut stay cut.
func (l *Lab) Cut(side, other []*Node) {
	l.tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range side {
		for _, b := range other {
			if a != b {
				l.cuts[l.pair(a, b)] = true
			}
		}
	}
	l.applyLocked()
}

// Heal restores the links between the nodes of side and of other.
func (l *Lab) Heal(side, other []*Node) {
	l.tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range side {
		for _, b := range other {
			delete(l.cuts, l.pair(a, b))
		}
	}
	l.applyLocked()
}

// HealAll restores every link.
func (l *Lab) HealAll() {
	l.tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.cuts)
	l.applyLocked()
}

// Cuts describes the links cut now ("m-r1 m-s2 …", or "none").
func (l *Lab) Cuts() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for p := range l.cuts {
		out = append(out, p[0].Name+"-"+p[1].Name)
	}
	if len(out) == 0 {
		return "none"
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// pair orders a and b as the lab added them.
func (l *Lab) pair(a, b *Node) [2]*Node {
	if slices.Index(l.nodes, a) > slices.Index(l.nodes, b) {
		a, b = b, a
	}
	return [2]*Node{a, b}
}

// applyLocked makes the firewall drop exactly the cut pairs.
func (l *Lab) applyLocked() {
	var drops [][2]net.IP
	for p := range l.cuts {
		drops = append(drops, [2]net.IP{p[0].IP, p[1].IP}, [2]net.IP{p[1].IP, p[0].IP})
	}
	if err := l.fw.set(drops); err != nil {
		l.tb.Fatalf("netlab: cutting links: %v", err)
	}
}

// firewall is the lab's nftables table in the root namespace: a filter
// chain on the bridge's forward path, where every packet between two
// nodes passes, holding one drop rule per cut direction.
type firewall struct {
	table *nftables.Table
	chain *nftables.Chain
}

func newFirewall(name string) (*firewall, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, err
	}
	f := &firewall{table: &nftables.Table{Family: nftables.TableFamilyBridge, Name: name}}
	c.AddTable(f.table)
	accept := nftables.ChainPolicyAccept
	f.chain = c.AddChain(&nftables.Chain{
		Name:     "cuts",
		Table:    f.table,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookForward,
		Priority: nftables.ChainPriorityFilter,
		Policy:   &accept,
	})
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("adding table %s: %w", name, err)
	}
	return f, nil
}

// set replaces the chain's rules by one drop per (source, destination),
// in one transaction.
func (f *firewall) set(drops [][2]net.IP) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	c.FlushChain(f.chain)
	for _, d := range drops {
		c.AddRule(&nftables.Rule{Table: f.table, Chain: f.chain, Exprs: dropExprs(d[0], d[1])})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	return nil
}

// dropExprs is `ether type ip ip saddr SRC ip daddr DST drop`.
func dropExprs(src, dst net.IP) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(unix.ETH_P_IP)},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: src.To4()},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: dst.To4()},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}

// remove deletes the table.
func (f *firewall) remove() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	c.DelTable(f.table)
	return c.Flush()
}

// removeStaleTables deletes the bridge tables stale says are left over.
func removeStaleTables(stale func(string) bool) {
	c, err := nftables.New()
	if err != nil {
		return
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyBridge)
	if err != nil {
		return
	}
	n := 0
	for _, t := range tables {
		if stale(t.Name) {
			c.DelTable(t)
			n++
		}
	}
	if n > 0 {
		_ = c.Flush()
	}
}
