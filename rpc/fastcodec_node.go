package rpc

import (
	"net/rpc"
	"slices"
	"time"
	"unsafe"

	"github.com/weft-sched/weft/scheduler"
)

// Hand-written msgpack codecs of the heartbeat path (see fastcodec.go). Each
// encoder writes its fields in the order the reflection codec does (by
// codec tag), every field present but Resources.Extended when empty
// (omitempty). A field added to one of these types needs a place in both
// its encoder and its decoder: TestWireMatchesReflection fails until it
// has one.

// Sizes charged for what decoding allocates, as checkDecodeCost charges.
var (
	sizeContainerReport = int64(unsafe.Sizeof(ContainerReport{}))
	sizeHeartbeatReq    = int64(unsafe.Sizeof(HeartbeatRequest{}))
	sizeHeartbeatResult = int64(unsafe.Sizeof(HeartbeatResult{}))
	sizeKillOrder       = int64(unsafe.Sizeof(KillOrder{}))
	sizeWorkloadKey     = int64(unsafe.Sizeof(WorkloadKey{}))
	sizeLeastLoadedNode = int64(unsafe.Sizeof(scheduler.LeastLoadedNode{}))
	sizeAgentFederation = int64(unsafe.Sizeof(AgentFederation{}))
)

// ---- net/rpc headers ----------------------------------------------------

// appendFast appends a response header and body with the hand-written
// codecs, if body has one and header is a net/rpc response header; it
// reports whether it did. (Request headers are always written by hand:
// appendRequestHeader.)
func appendFast(b *[]byte, header, body any) bool {
	e, ok := body.(wireEncoder)
	if !ok {
		return false
	}
	h, ok := header.(*rpc.Response)
	if !ok {
		return false
	}
	*b = appendResponseHeader(*b, h)
	*b = e.appendMsgpack(*b)
	return true
}

// appendRequestHeader writes net/rpc's request header, a map of Seq and
// ServiceMethod as the reflection codec writes rpc.Request, and, when the
// request carries a credential, the same under AuthToken: the server
// checks it before it reads the body (Server.ServeConn). Peers that do not
// know the key skip it.
func appendRequestHeader(b []byte, h *rpc.Request, token string) []byte {
	if token == "" {
		b = appendMapHeader(b, 2)
	} else {
		b = appendMapHeader(b, 3)
		b = appendStr(b, "AuthToken")
		b = appendStr(b, token)
	}
	b = appendStr(b, "Seq")
	b = appendUint(b, h.Seq)
	b = appendStr(b, "ServiceMethod")
	return appendStr(b, h.ServiceMethod)
}

func appendResponseHeader(b []byte, h *rpc.Response) []byte {
	b = appendMapHeader(b, 3)
	b = appendStr(b, "Error")
	b = appendStr(b, h.Error)
	b = appendStr(b, "Seq")
	b = appendUint(b, h.Seq)
	b = appendStr(b, "ServiceMethod")
	return appendStr(b, h.ServiceMethod)
}

// decodeRequestHeader reads a request header into h, and the credential
// it carries (if any) into token.
func decodeRequestHeader(r *wireReader, h *rpc.Request, token *string) error {
	return r.wireStruct(func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "AuthToken":
			*token, err = r.str()
		case "Seq":
			h.Seq, err = r.uint()
		case "ServiceMethod":
			h.ServiceMethod, err = r.str()
		default:
			return false, nil
		}
		return true, err
	})
}

func decodeResponseHeader(r *wireReader, h *rpc.Response) error {
	return r.wireStruct(func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "Error":
			h.Error, err = r.str()
		case "Seq":
			h.Seq, err = r.uint()
		case "ServiceMethod":
			h.ServiceMethod, err = r.str()
		default:
			return false, nil
		}
		return true, err
	})
}

// ---- RequestHeader -------------------------------------------------------

// decodeField decodes one of the request header's fields, which every
// request inlines among its own.
func (h *RequestHeader) decodeField(r *wireReader, k []byte) (ok bool, err error) {
	switch string(k) {
	case "allow_stale":
		h.AllowStale, err = r.bool()
	case "auth_token":
		h.AuthToken, err = r.str()
	case "max_wait":
		var v int64
		v, err = r.int()
		h.MaxWait = time.Duration(v)
	case "min_query_index":
		h.MinQueryIndex, err = r.uint()
	case "region":
		h.Region, err = r.str()
	case "request_id":
		h.RequestID, err = r.str()
	case "timeout":
		var v int64
		v, err = r.int()
		h.Timeout = time.Duration(v)
	default:
		return false, nil
	}
	return true, err
}

// ---- scheduler.Resources -------------------------------------------------

func appendResources(b []byte, res *scheduler.Resources) []byte {
	if len(res.Extended) == 0 {
		b = appendMapHeader(b, 2)
	} else {
		b = appendMapHeader(b, 3)
		b = appendStr(b, "extended")
		b = appendMapHeader(b, len(res.Extended))
		names := make([]string, 0, len(res.Extended))
		for name := range res.Extended {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			b = appendStr(b, name)
			b = appendInt(b, res.Extended[name])
		}
	}
	b = appendStr(b, "memory_mb")
	b = appendInt(b, res.MemoryMB)
	b = appendStr(b, "vcores")
	return appendInt(b, res.Vcores)
}

func decodeResources(r *wireReader, res *scheduler.Resources) error {
	return r.wireStruct(func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "extended":
			err = decodeExtended(r, res)
		case "memory_mb":
			res.MemoryMB, err = r.int()
		case "vcores":
			res.Vcores, err = r.int()
		default:
			return false, nil
		}
		return true, err
	})
}

func decodeExtended(r *wireReader, res *scheduler.Resources) error {
	n, err := r.mapLen()
	if err != nil || n < 0 {
		return err
	}
	if err := r.charge(1, mapHeaderCost, "map[string]int64"); err != nil {
		return err
	}
	if err := r.charge(int64(n), 2*(16+8+1), "map[string]int64"); err != nil {
		return err
	}
	if res.Extended == nil {
		res.Extended = make(map[string]int64, n)
	}
	for range n {
		name, err := r.str()
		if err != nil {
			return err
		}
		if res.Extended[name], err = r.int(); err != nil {
			return err
		}
	}
	return nil
}

// ---- NodeLoad --------------------------------------------------------------

func (l *NodeLoad) appendMsgpack(b []byte) []byte {
	fields := 7
	for _, set := range []bool{l.OpportunisticDemand != 0, l.Measured != nil, l.UseLimit != nil, l.Enforcement != ""} {
		if set {
			fields++
		}
	}
	b = appendMapHeader(b, fields)
	if l.Enforcement != "" { // omitempty
		b = appendStr(b, "enforcement")
		b = appendStr(b, l.Enforcement)
	}
	b = appendStr(b, "estimated_queue_wait")
	b = appendInt(b, int64(l.EstimatedQueueWait))
	if l.Measured != nil { // omitempty
		b = appendStr(b, "measured")
		b = appendResources(b, l.Measured)
	}
	if l.OpportunisticDemand != 0 { // omitempty
		b = appendStr(b, "opportunistic_demand")
		b = appendInt(b, int64(l.OpportunisticDemand))
	}
	b = appendStr(b, "queue_capacity")
	b = appendInt(b, int64(l.QueueCapacity))
	b = appendStr(b, "queued")
	b = appendInt(b, int64(l.Queued))
	b = appendStr(b, "running_guaranteed")
	b = appendInt(b, int64(l.RunningGuaranteed))
	b = appendStr(b, "running_opportunistic")
	b = appendInt(b, int64(l.RunningOpportunistic))
	if l.UseLimit != nil { // omitempty
		b = appendStr(b, "use_limit")
		b = appendResources(b, l.UseLimit)
	}
	b = appendStr(b, "used")
	b = appendResources(b, &l.Used)
	b = appendStr(b, "used_opportunistic")
	return appendResources(b, &l.UsedOpportunistic)
}

func (l *NodeLoad) decodeMsgpack(r *wireReader) error {
	return r.wireStruct(func(k []byte) (ok bool, err error) {
		var v int64
		switch string(k) {
		case "estimated_queue_wait":
			v, err = r.int()
			l.EstimatedQueueWait = time.Duration(v)
		case "opportunistic_demand":
			v, err = r.int()
			l.OpportunisticDemand = int(v)
		case "queue_capacity":
			v, err = r.int()
			l.QueueCapacity = int(v)
		case "queued":
			v, err = r.int()
			l.Queued = int(v)
		case "running_guaranteed":
			v, err = r.int()
			l.RunningGuaranteed = int(v)
		case "running_opportunistic":
			v, err = r.int()
			l.RunningOpportunistic = int(v)
		case "enforcement":
			l.Enforcement, err = r.str()
		case "measured":
			l.Measured = new(scheduler.Resources)
			err = decodeResources(r, l.Measured)
		case "use_limit":
			l.UseLimit = new(scheduler.Resources)
			err = decodeResources(r, l.UseLimit)
		case "used":
			err = decodeResources(r, &l.Used)
		case "used_opportunistic":
			err = decodeResources(r, &l.UsedOpportunistic)
		default:
			return false, nil
		}
		return true, err
	})
}

// ---- ContainerReport -----------------------------------------------------

func (c *ContainerReport) appendMsgpack(b []byte) []byte {
	if c.Token == "" {
		b = appendMapHeader(b, 13)
	} else {
		b = appendMapHeader(b, 14)
	}
	b = appendStr(b, "allocated_at")
	b = appendInt(b, c.AllocatedAt)
	b = appendStr(b, "app_id")
	b = appendStr(b, c.AppID)
	b = appendStr(b, "ask_id")
	b = appendUint(b, c.AskID)
	b = appendStr(b, "at")
	b = appendInt(b, c.At)
	b = appendStr(b, "attempt")
	b = appendInt(b, int64(c.Attempt))
	b = appendStr(b, "diagnostics")
	b = appendStr(b, c.Diagnostics)
	b = appendStr(b, "execution_type")
	b = appendStr(b, c.ExecutionType)
	b = appendStr(b, "exit_code")
	if c.ExitCode == nil {
		b = appendNil(b)
	} else {
		b = appendInt(b, int64(*c.ExitCode))
	}
	b = appendStr(b, "id")
	b = appendStr(b, c.ID)
	b = appendStr(b, "reason")
	b = appendStr(b, string(c.Reason))
	b = appendStr(b, "resources")
	b = appendResources(b, &c.Resources)
	b = appendStr(b, "started_at")
	b = appendInt(b, c.StartedAt)
	b = appendStr(b, "state")
	b = appendStr(b, string(c.State))
	if c.Token != "" { // omitempty
		b = appendStr(b, "token")
		b = appendStr(b, c.Token)
	}
	return b
}

func (c *ContainerReport) decodeMsgpack(r *wireReader) error {
	return r.wireStruct(func(k []byte) (ok bool, err error) {
		var v int64
		var s string
		switch string(k) {
		case "allocated_at":
			c.AllocatedAt, err = r.int()
		case "app_id":
			c.AppID, err = r.str()
		case "ask_id":
			c.AskID, err = r.uint()
		case "at":
			c.At, err = r.int()
		case "attempt":
			v, err = r.int()
			c.Attempt = int(v)
		case "diagnostics":
			c.Diagnostics, err = r.str()
		case "execution_type":
			c.ExecutionType, err = r.str()
		case "exit_code":
			if r.nil() {
				c.ExitCode = nil
				break
			}
			if err = r.charge(1, 8, "*int"); err != nil {
				break
			}
			v, err = r.int()
			code := int(v)
			c.ExitCode = &code
		case "id":
			c.ID, err = r.str()
		case "reason":
			s, err = r.str()
			c.Reason = scheduler.ExitReason(s)
		case "resources":
			err = decodeResources(r, &c.Resources)
		case "started_at":
			c.StartedAt, err = r.int()
		case "state":
			s, err = r.str()
			c.State = scheduler.ContainerState(s)
		case "token":
			c.Token, err = r.str()
		default:
			return false, nil
		}
		return true, err
	})
}

// ---- HeartbeatRequest ----------------------------------------------------

func (h *HeartbeatRequest) appendMsgpack(b []byte) []byte {
	if len(h.AppsToCheck) == 0 {
		b = appendMapHeader(b, 17)
	} else {
		b = appendMapHeader(b, 18)
	}
	b = appendStr(b, "allow_stale")
	b = appendBool(b, h.AllowStale)
	if len(h.AppsToCheck) > 0 { // omitempty
		b = appendStr(b, "apps_to_check")
		b = appendStrings(b, h.AppsToCheck)
	}
	b = appendStr(b, "auth_token")
	b = appendStr(b, h.AuthToken)
	b = appendStr(b, "containers")
	if h.Containers == nil {
		b = appendNil(b)
	} else {
		b = appendArrayHeader(b, len(h.Containers))
		for i := range h.Containers {
			b = h.Containers[i].appendMsgpack(b)
		}
	}
	b = appendStr(b, "epoch")
	b = appendUint(b, h.Epoch)
	b = appendStr(b, "least_loaded_at")
	b = appendInt(b, h.LeastLoadedAt)
	b = appendStr(b, "load")
	b = h.Load.appendMsgpack(b)
	b = appendStr(b, "max_wait")
	b = appendInt(b, int64(h.MaxWait))
	b = appendStr(b, "min_query_index")
	b = appendUint(b, h.MinQueryIndex)
	b = appendStr(b, "mint_cert_expiry")
	b = appendInt(b, h.MintCertExpiry)
	b = appendStr(b, "node_id")
	b = appendStr(b, h.NodeID)
	b = appendStr(b, "region")
	b = appendStr(b, h.Region)
	b = appendStr(b, "request_id")
	b = appendStr(b, h.RequestID)
	b = appendStr(b, "same_list_ok")
	b = appendBool(b, h.SameListOK)
	b = appendStr(b, "secret")
	b = appendStr(b, h.Secret)
	b = appendStr(b, "seq")
	b = appendUint(b, h.Seq)
	b = appendStr(b, "timeout")
	b = appendInt(b, int64(h.Timeout))
	b = appendStr(b, "workload_key_id")
	return appendUint(b, uint64(h.WorkloadKeyID))
}

func (h *HeartbeatRequest) decodeMsgpack(r *wireReader) error {
	return r.wireStruct(func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "apps_to_check":
			h.AppsToCheck, err = r.strings()
		case "containers":
			h.Containers, err = decodeContainerReports(r)
		case "epoch":
			h.Epoch, err = r.uint()
		case "least_loaded_at":
			h.LeastLoadedAt, err = r.int()
		case "load":
			err = h.Load.decodeMsgpack(r)
		case "mint_cert_expiry":
			h.MintCertExpiry, err = r.int()
		case "node_id":
			h.NodeID, err = r.str()
		case "same_list_ok":
			h.SameListOK, err = r.bool()
		case "secret":
			h.Secret, err = r.str()
		case "seq":
			h.Seq, err = r.uint()
		case "workload_key_id":
			var v uint64
			v, err = r.uintOf(32)
			h.WorkloadKeyID = uint32(v)
		default:
			return h.RequestHeader.decodeField(r, k)
		}
		return true, err
	})
}

func decodeContainerReports(r *wireReader) ([]ContainerReport, error) {
	n, err := r.arrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	if err := r.charge(int64(n), sizeContainerReport, "[]rpc.ContainerReport"); err != nil {
		return nil, err
	}
	out := make([]ContainerReport, n)
	for i := range out {
		if err := out[i].decodeMsgpack(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ---- HeartbeatResponse ---------------------------------------------------

func (h *HeartbeatResponse) appendMsgpack(b []byte) []byte {
	fields := 14
	if h.Federation != nil {
		fields++
	}
	if len(h.AppsRunning) > 0 {
		fields++
	}
	if h.MintCert != "" {
		fields++
	}
	if len(h.Recorded) > 0 {
		fields++
	}
	if h.LeastLoadedCandidates != 0 {
		fields++
	}
	if h.MaxAllocationsPerAM != 0 {
		fields++
	}
	b = appendMapHeader(b, fields)
	b = appendStr(b, "acked")
	b = appendStrings(b, h.Acked)
	if len(h.AppsRunning) > 0 { // omitempty
		b = appendStr(b, "apps_running")
		b = appendStrings(b, h.AppsRunning)
	}
	b = appendStr(b, "centralized")
	b = appendBool(b, h.Centralized)
	b = appendStr(b, "demote")
	b = appendStrings(b, h.Demote)
	if h.Federation != nil {
		b = appendStr(b, "federation")
		b = h.Federation.appendMsgpack(b)
	}
	b = appendStr(b, "kill")
	if h.Kill == nil {
		b = appendNil(b)
	} else {
		b = appendArrayHeader(b, len(h.Kill))
		for _, k := range h.Kill {
			b = appendMapHeader(b, 2)
			b = appendStr(b, "id")
			b = appendStr(b, k.ID)
			b = appendStr(b, "reason")
			b = appendStr(b, string(k.Reason))
		}
	}
	b = appendStr(b, "launch_ams")
	if h.LaunchAMs == nil {
		b = appendNil(b)
	} else {
		b = appendReflected(b, h.LaunchAMs) // an AM launch is rare
	}
	b = appendStr(b, "least_loaded")
	b = appendLeastLoaded(b, h.LeastLoaded)
	b = appendStr(b, "least_loaded_age")
	b = appendInt(b, int64(h.LeastLoadedAge))
	b = appendStr(b, "least_loaded_at")
	b = appendInt(b, h.LeastLoadedAt)
	if h.LeastLoadedCandidates != 0 { // omitempty
		b = appendStr(b, "least_loaded_candidates")
		b = appendInt(b, int64(h.LeastLoadedCandidates))
	}
	b = appendStr(b, "least_loaded_same")
	b = appendBool(b, h.LeastLoadedSame)
	if h.MaxAllocationsPerAM != 0 { // omitempty
		b = appendStr(b, "max_allocations_per_am")
		b = appendInt(b, int64(h.MaxAllocationsPerAM))
	}
	if h.MintCert != "" { // omitempty
		b = appendStr(b, "mint_cert")
		b = appendStr(b, h.MintCert)
	}
	b = appendStr(b, "promote")
	b = appendStrings(b, h.Promote)
	b = appendStr(b, "queue_limit")
	b = appendInt(b, int64(h.QueueLimit))
	b = appendStr(b, "re_register")
	b = appendBool(b, h.ReRegister)
	if len(h.Recorded) > 0 { // omitempty
		b = appendStr(b, "recorded")
		b = appendStrings(b, h.Recorded)
	}
	b = appendStr(b, "servers")
	b = appendStrings(b, h.Servers)
	b = appendStr(b, "workload_keys")
	if h.WorkloadKeys == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, len(h.WorkloadKeys))
	for _, k := range h.WorkloadKeys {
		b = appendMapHeader(b, 2)
		b = appendStr(b, "id")
		b = appendUint(b, uint64(k.ID))
		b = appendStr(b, "public_key")
		b = appendBin(b, k.PublicKey)
	}
	return b
}

func (h *HeartbeatResponse) decodeMsgpack(r *wireReader) error {
	return r.wireStruct(func(k []byte) (ok bool, err error) {
		var v int64
		switch string(k) {
		case "acked":
			h.Acked, err = r.strings()
		case "apps_running":
			h.AppsRunning, err = r.strings()
		case "centralized":
			h.Centralized, err = r.bool()
		case "demote":
			h.Demote, err = r.strings()
		case "federation":
			h.Federation, err = decodeAgentFederation(r)
		case "kill":
			h.Kill, err = decodeKillOrders(r)
		case "launch_ams":
			if !r.nil() {
				err = r.reflected(&h.LaunchAMs, "[]rpc.AMLaunch")
			}
		case "least_loaded":
			h.LeastLoaded, err = decodeLeastLoaded(r)
		case "least_loaded_age":
			v, err = r.int()
			h.LeastLoadedAge = time.Duration(v)
		case "least_loaded_at":
			h.LeastLoadedAt, err = r.int()
		case "least_loaded_candidates":
			v, err = r.int()
			h.LeastLoadedCandidates = int(v)
		case "least_loaded_same":
			h.LeastLoadedSame, err = r.bool()
		case "max_allocations_per_am":
			v, err = r.int()
			h.MaxAllocationsPerAM = int(v)
		case "mint_cert":
			h.MintCert, err = r.str()
		case "promote":
			h.Promote, err = r.strings()
		case "queue_limit":
			v, err = r.int()
			h.QueueLimit = int(v)
		case "re_register":
			h.ReRegister, err = r.bool()
		case "recorded":
			h.Recorded, err = r.strings()
		case "servers":
			h.Servers, err = r.strings()
		case "workload_keys":
			h.WorkloadKeys, err = decodeWorkloadKeys(r)
		default:
			return false, nil
		}
		return true, err
	})
}

func (f *AgentFederation) appendMsgpack(b []byte) []byte {
	b = appendMapHeader(b, 2)
	b = appendStr(b, "routers")
	b = appendStrings(b, f.Routers)
	b = appendStr(b, "subcluster")
	return appendStr(b, f.Subcluster)
}

// decodeAgentFederation reads an AgentFederation, or nil.
func decodeAgentFederation(r *wireReader) (*AgentFederation, error) {
	if r.nil() {
		return nil, nil
	}
	if err := r.charge(1, sizeAgentFederation, "rpc.AgentFederation"); err != nil {
		return nil, err
	}
	f := new(AgentFederation)
	err := r.wireStruct(func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "routers":
			f.Routers, err = r.strings()
		case "subcluster":
			f.Subcluster, err = r.str()
		default:
			return false, nil
		}
		return true, err
	})
	return f, err
}

func decodeWorkloadKeys(r *wireReader) ([]WorkloadKey, error) {
	n, err := r.arrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	if err := r.charge(int64(n), sizeWorkloadKey, "[]rpc.WorkloadKey"); err != nil {
		return nil, err
	}
	out := make([]WorkloadKey, n)
	for i := range out {
		k := &out[i]
		err := r.wireStruct(func(key []byte) (ok bool, err error) {
			switch string(key) {
			case "id":
				var v uint64
				v, err = r.uintOf(32)
				k.ID = uint32(v)
			case "public_key":
				k.PublicKey, err = r.bin()
			default:
				return false, nil
			}
			return true, err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeKillOrders(r *wireReader) ([]KillOrder, error) {
	n, err := r.arrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	if err := r.charge(int64(n), sizeKillOrder, "[]rpc.KillOrder"); err != nil {
		return nil, err
	}
	out := make([]KillOrder, n)
	for i := range out {
		o := &out[i]
		err := r.wireStruct(func(k []byte) (ok bool, err error) {
			switch string(k) {
			case "id":
				o.ID, err = r.str()
			case "reason":
				var s string
				s, err = r.str()
				o.Reason = scheduler.ExitReason(s)
			default:
				return false, nil
			}
			return true, err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ---- scheduler.LeastLoadedNode -------------------------------------------

func appendLeastLoaded(b []byte, list []scheduler.LeastLoadedNode) []byte {
	if list == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, len(list))
	for i := range list {
		n := &list[i]
		b = appendMapHeader(b, 6)
		b = appendStr(b, "address")
		b = appendStr(b, n.Address)
		b = appendStr(b, "capacity")
		b = appendResources(b, &n.Capacity)
		b = appendStr(b, "free")
		b = appendResources(b, &n.Free)
		b = appendStr(b, "node_id")
		b = appendStr(b, n.NodeID)
		b = appendStr(b, "queue_space")
		b = appendInt(b, int64(n.QueueSpace))
		b = appendStr(b, "rack")
		b = appendStr(b, n.Rack)
	}
	return b
}

func decodeLeastLoaded(r *wireReader) ([]scheduler.LeastLoadedNode, error) {
	n, err := r.arrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	if err := r.charge(int64(n), sizeLeastLoadedNode, "[]scheduler.LeastLoadedNode"); err != nil {
		return nil, err
	}
	out := make([]scheduler.LeastLoadedNode, n)
	for i := range out {
		e := &out[i]
		err := r.wireStruct(func(k []byte) (ok bool, err error) {
			switch string(k) {
			case "address":
				e.Address, err = r.str()
			case "capacity":
				err = decodeResources(r, &e.Capacity)
			case "free":
				err = decodeResources(r, &e.Free)
			case "node_id":
				e.NodeID, err = r.str()
			case "queue_space":
				var v int64
				v, err = r.int()
				e.QueueSpace = int(v)
			case "rack":
				e.Rack, err = r.str()
			default:
				return false, nil
			}
			return true, err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ---- HeartbeatBatchRequest / HeartbeatBatchResponse ----------------------

func (h *HeartbeatBatchRequest) appendMsgpack(b []byte) []byte {
	b = appendMapHeader(b, 8)
	b = appendStr(b, "allow_stale")
	b = appendBool(b, h.AllowStale)
	b = appendStr(b, "auth_token")
	b = appendStr(b, h.AuthToken)
	b = appendStr(b, "heartbeats")
	if h.Heartbeats == nil {
		b = appendNil(b)
	} else {
		b = appendArrayHeader(b, len(h.Heartbeats))
		for i := range h.Heartbeats {
			b = h.Heartbeats[i].appendMsgpack(b)
		}
	}
	b = appendStr(b, "max_wait")
	b = appendInt(b, int64(h.MaxWait))
	b = appendStr(b, "min_query_index")
	b = appendUint(b, h.MinQueryIndex)
	b = appendStr(b, "region")
	b = appendStr(b, h.Region)
	b = appendStr(b, "request_id")
	b = appendStr(b, h.RequestID)
	b = appendStr(b, "timeout")
	return appendInt(b, int64(h.Timeout))
}

func (h *HeartbeatBatchRequest) decodeMsgpack(r *wireReader) error {
	return r.wireStruct(func(k []byte) (ok bool, err error) {
		if string(k) != "heartbeats" {
			return h.RequestHeader.decodeField(r, k)
		}
		n, err := r.arrayLen()
		if err != nil || n < 0 {
			h.Heartbeats = nil
			return true, err
		}
		if err := r.charge(int64(n), sizeHeartbeatReq, "[]rpc.HeartbeatRequest"); err != nil {
			return true, err
		}
		h.Heartbeats = make([]HeartbeatRequest, n)
		for i := range h.Heartbeats {
			if err := h.Heartbeats[i].decodeMsgpack(r); err != nil {
				return true, err
			}
		}
		return true, nil
	})
}

func (h *HeartbeatBatchResponse) appendMsgpack(b []byte) []byte {
	if h.Federation == nil {
		b = appendMapHeader(b, 2)
	} else {
		b = appendMapHeader(b, 3)
		b = appendStr(b, "federation")
		b = h.Federation.appendMsgpack(b)
	}
	b = appendStr(b, "least_loaded")
	b = appendLeastLoaded(b, h.LeastLoaded)
	b = appendStr(b, "results")
	if h.Results == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, len(h.Results))
	for i := range h.Results {
		res := &h.Results[i]
		b = appendMapHeader(b, 3)
		b = appendStr(b, "error")
		b = appendStr(b, res.Error)
		b = appendStr(b, "response")
		b = res.Response.appendMsgpack(b)
		b = appendStr(b, "shared_list")
		b = appendBool(b, res.SharedList)
	}
	return b
}

func (h *HeartbeatBatchResponse) decodeMsgpack(r *wireReader) error {
	return r.wireStruct(func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "federation":
			h.Federation, err = decodeAgentFederation(r)
		case "least_loaded":
			h.LeastLoaded, err = decodeLeastLoaded(r)
		case "results":
			h.Results, err = decodeHeartbeatResults(r)
		default:
			return false, nil
		}
		return true, err
	})
}

func decodeHeartbeatResults(r *wireReader) ([]HeartbeatResult, error) {
	n, err := r.arrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	if err := r.charge(int64(n), sizeHeartbeatResult, "[]rpc.HeartbeatResult"); err != nil {
		return nil, err
	}
	out := make([]HeartbeatResult, n)
	for i := range out {
		res := &out[i]
		err := r.wireStruct(func(k []byte) (ok bool, err error) {
			switch string(k) {
			case "error":
				res.Error, err = r.str()
			case "response":
				err = res.Response.decodeMsgpack(r)
			case "shared_list":
				res.SharedList, err = r.bool()
			default:
				return false, nil
			}
			return true, err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
