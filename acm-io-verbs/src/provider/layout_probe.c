/*
 * The sizes and offsets of acm_prov.h's structures as the C compiler lays them out,
 * for the layout test of the Rust declarations (abi.rs). Built by build.rs only when
 * the header is installed (libibverbs-dev and libibumad-dev).
 */
#include <stddef.h>
#include <infiniband/acm_prov.h>

struct acm_layout_entry {
	const char *name;
	size_t value;
};

#define SIZE(t) { "sizeof " #t, sizeof(struct t) }
#define OFF(t, f) { #t "." #f, offsetof(struct t, f) }

static const struct acm_layout_entry entries[] = {
	SIZE(acm_device), OFF(acm_device, verbs), OFF(acm_device, dev_guid),
	SIZE(acm_port), OFF(acm_port, dev), OFF(acm_port, port_num),
	SIZE(acm_endpoint), OFF(acm_endpoint, port), OFF(acm_endpoint, pkey),
	SIZE(acm_address), OFF(acm_address, endpoint), OFF(acm_address, info),
	OFF(acm_address, id_string), OFF(acm_address, type),
	SIZE(acm_provider), OFF(acm_provider, size), OFF(acm_provider, version),
	OFF(acm_provider, name), OFF(acm_provider, open_device),
	OFF(acm_provider, close_device), OFF(acm_provider, open_port),
	OFF(acm_provider, close_port), OFF(acm_provider, open_endpoint),
	OFF(acm_provider, close_endpoint), OFF(acm_provider, add_address),
	OFF(acm_provider, remove_address), OFF(acm_provider, resolve),
	OFF(acm_provider, query), OFF(acm_provider, handle_event),
	OFF(acm_provider, query_perf),
	SIZE(acm_msg), OFF(acm_msg, hdr), OFF(acm_msg, data),
	SIZE(ib_mad_addr), OFF(ib_mad_addr, qpn), OFF(ib_mad_addr, qkey),
	OFF(ib_mad_addr, lid), OFF(ib_mad_addr, sl), OFF(ib_mad_addr, path_bits),
	OFF(ib_mad_addr, grh_present), OFF(ib_mad_addr, gid_index),
	OFF(ib_mad_addr, hop_limit), OFF(ib_mad_addr, traffic_class),
	OFF(ib_mad_addr, gid), OFF(ib_mad_addr, flow_label),
	OFF(ib_mad_addr, pkey_index), OFF(ib_mad_addr, reserved),
	SIZE(ib_user_mad), OFF(ib_user_mad, agent_id), OFF(ib_user_mad, status),
	OFF(ib_user_mad, timeout_ms), OFF(ib_user_mad, retries),
	OFF(ib_user_mad, length), OFF(ib_user_mad, addr),
	SIZE(umad_sa_packet),
	SIZE(acm_sa_mad), OFF(acm_sa_mad, context), OFF(acm_sa_mad, umad),
	OFF(acm_sa_mad, sa_mad),
	{ "alignof acm_msg", _Alignof(struct acm_msg) },
	{ "alignof acm_sa_mad", _Alignof(struct acm_sa_mad) },
	{ "alignof acm_address", _Alignof(struct acm_address) },
	{ "IBV_EVENT_CLIENT_REREGISTER", IBV_EVENT_CLIENT_REREGISTER },
	{ "version ACM_PROV_VERSION", ACM_PROV_VERSION },
};

const struct acm_layout_entry *acm_layout_entries(size_t *count)
{
	*count = sizeof entries / sizeof entries[0];
	return entries;
}
