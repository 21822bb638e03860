// A group's history, rebuilt from its events (docs/events.md): who owned which partition when, the rebalances
// with their causes, the spans where partitions had no owner, and the group's first formation.
//
// Classic groups: ownership comes from sync_completed's decoded `assignments`. In an eager rebalance every member
// gives up all its partitions when it rejoins (Kafka's ConsumerCoordinator.onJoinPrepare), so bars end at
// rebalance_started; in a cooperative one (cooperative-sticky) a member keeps what it is not asked to give up, so
// bars run on until a sync_completed leaves them out. Consumer groups (KIP-848): ownership comes from each
// member's member_reconciled (`assigned`, and `pending_revocation` drawn as still held but being revoked,
// docs/spec/consumer-groups.md section 5.1); the member epochs are kept per lane.
//
// A KIP-848 member keeps its client-chosen id: kicked or expired, it re-joins at epoch 0 under the same id, so its
// lane comes back to life (its departure kept in `pastEnds`, drawn as a mark) instead of staying ended.
//
// Broker restarts (docs/events.md, "Broker restarts"): broker_stopped and broker_started (group_id "", asked for with
// broker_events=true) become `restarts`. A restarted broker numbers its events from 1 again under a new run_id, so
// seq is compared within a run only; a new run_id starts a new run whatever its seq.

const tp = (topic, partition) => `${topic}-${partition}`;

// The words for a rebalance's cause on its marker.
const CAUSES = {
  member_joined: "joined",
  member_rejoined: "rejoined",
  member_left: "left",
  member_expired: "expired",
  member_kicked: "kicked",
  member_fenced: "fenced",
  static_member_replaced: "fenced (replaced)",
  sync_timeout: "sync timeout",
  forced: "forced",
  subscription_changed: "joined / subscription",
  metadata_changed: "metadata",
  member_removed: "removed",
};

export function causeLabel(cause) {
  return CAUSES[cause] ?? cause ?? "?";
}

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

class Lane {
  constructor(memberId, ts, fields = {}) {
    this.memberId = memberId;
    this.clientId = fields.client_id ?? "";
    this.host = fields.client_host ?? "";
    this.instanceId = fields.group_instance_id ?? null;
    this.startMs = ts;
    this.endMs = null;
    this.endCause = null; // left, expired, kicked, fenced
    this.pastEnds = []; // {ts, cause}: departures it came back from (a member that re-joined under its id)
    this.silence = null; // {start, end}: the span a member sent nothing before it expired
    this.bars = []; // {key, topic, partition, start, end, pending}
    this.open = new Map(); // key -> the bar still open
    this.epochs = []; // consumer groups: {ts, epoch}
    this.state = null; // consumer groups: stable, unrevoked_partitions, unreleased_partitions
  }

  get active() {
    return this.endMs === null;
  }

  // Back in the group under the same member id: live again, its departure kept as a past mark.
  revive(ts) {
    if (this.active) return;
    this.pastEnds.push({ ts: this.endMs, cause: this.endCause, back: ts });
    this.endMs = null;
    this.endCause = null;
    this.state = null;
  }

  owned() {
    return [...this.open.values()].filter((bar) => !bar.pending).map((bar) => bar.key);
  }

  pending() {
    return [...this.open.values()].filter((bar) => bar.pending).map((bar) => bar.key);
  }

  hold(ts, topic, partition, pending = false) {
    const key = tp(topic, partition);
    const bar = this.open.get(key);
    if (bar && bar.pending === pending) return;
    if (bar) this.release(ts, key);
    const fresh = { key, topic, partition, start: ts, end: null, pending };
    this.bars.push(fresh);
    this.open.set(key, fresh);
  }

  release(ts, key) {
    const bar = this.open.get(key);
    if (!bar) return;
    bar.end = ts;
    this.open.delete(key);
  }

  releaseAll(ts) {
    for (const key of [...this.open.keys()]) this.release(ts, key);
  }

  // Holds exactly `assigned` (and `pending`, drawn apart) from now on.
  holdExactly(ts, assigned, pending = {}) {
    const wanted = new Map();
    for (const [topic, partitions] of Object.entries(assigned ?? {})) {
      for (const p of partitions) wanted.set(tp(topic, p), [topic, p, false]);
    }
    for (const [topic, partitions] of Object.entries(pending ?? {})) {
      for (const p of partitions) wanted.set(tp(topic, p), [topic, p, true]);
    }
    for (const [key, bar] of [...this.open]) {
      const want = wanted.get(key);
      if (!want || want[2] !== bar.pending) this.release(ts, key);
    }
    for (const [topic, p, isPending] of wanted.values()) this.hold(ts, topic, p, isPending);
  }
}

export class History {
  constructor(groupType = "classic") {
    // A share group (KIP-932) has the consumer group's events (epochs, member_reconciled): drawn the same way, its
    // members' lanes showing what each is assigned (a partition may be on several lanes at once).
    this.consumer = groupType === "consumer" || groupType === "share";
    this.lanes = new Map(); // member id -> Lane
    this.markers = []; // {ts, cause, label, member, formation}
    this.gaps = []; // {start, end, unowned}
    this.partitions = new Map(); // key -> {topic, partition}: every partition ever assigned
    this.firstMs = null;
    this.lastMs = null;
    this.formation = null; // {start, end}
    this.protocol = "eager";
    this.lastSeq = 0;
    this.expiries = new Map(); // member id -> its member_expired record, for the next marker
    this.openGap = null;
    this.lastJoined = null; // consumer groups: the member of the last member_joined, until the next epoch bump
    this.runId = null;
    this.runs = 0; // runs of the broker seen
    this.runEndMs = null; // the broker of the run before this one was last known alive then
    this.lostMs = null; // when the page's event stream last broke (streamLost)
    this.restarts = []; // {stoppedMs, downFromMs, startedMs, clean, loadMs, loaded, dataDir, shown}
  }

  static from(events, groupType) {
    const history = new History(groupType);
    for (const event of events) history.add(event);
    return history;
  }

  // The member's lane, created if need be; `revive`: the event says the member is in the group now, so an ended
  // lane (a consumer-group member that re-joined under its id) is live again.
  lane(memberId, ts, fields, revive = false) {
    let lane = this.lanes.get(memberId);
    if (lane && revive) lane.revive(ts);
    if (!lane) {
      lane = new Lane(memberId, ts, fields);
      this.lanes.set(memberId, lane);
    } else if (fields) {
      lane.clientId ||= fields.client_id ?? "";
      lane.host ||= fields.client_host ?? "";
      lane.instanceId ??= fields.group_instance_id ?? null;
    }
    return lane;
  }

  end(memberId, ts, cause) {
    const lane = this.lanes.get(memberId);
    if (!lane || !lane.active) return;
    lane.releaseAll(ts);
    lane.endMs = ts;
    lane.endCause = cause;
  }

  marker(ts, cause, member, extra = {}) {
    const expired = member ? this.expiries.get(member) : null;
    let label = causeLabel(cause);
    if ((cause === "member_expired" || cause === "expired") && expired) {
      const silence = expired.since_last_heartbeat_ms ?? expired.timeout_ms;
      if (silence !== null && silence !== undefined) label = `expired after ${seconds(silence)} silence`;
    }
    const formation = this.formation === null;
    if (formation) this.formation = { start: ts, end: null };
    this.markers.push({ ts, cause, label, member, formation, ...extra });
  }

  add(event) {
    const run = event.run_id ?? this.runId;
    if (run !== this.runId) {
      // Another run: its seq starts again. Its broker was alive at its last event and while the stream still ran.
      if (this.runId !== null) this.runEndMs = Math.max(this.lastMs ?? 0, this.lostMs ?? 0) || null;
      this.runId = run;
      this.runs += 1;
      this.lastSeq = 0;
    }
    if (event.seq <= this.lastSeq) return false;
    this.lastSeq = event.seq;
    const ts = event.ts_ms;
    this.firstMs ??= ts;
    this.lastMs = ts;
    if (event.event === "broker_stopped" || event.event === "broker_started") {
      this.restart(event, ts);
      return true;
    }
    if (event.group_type === "consumer" || event.group_type === "share") this.consumer = true;
    if (this.consumer) this.addConsumer(event, ts);
    else this.addClassic(event, ts);
    this.updateGaps(ts);
    return true;
  }

  addClassic(event, ts) {
    switch (event.event) {
      case "member_joined":
        this.lane(event.member_id, ts, event, true);
        break;
      case "member_left":
        this.end(event.member_id, ts, "left");
        break;
      case "member_expired":
        this.expiries.set(event.member_id, event);
        this.noteSilence(event, ts);
        this.end(event.member_id, ts, event.cause === "kicked" ? "kicked" : "expired");
        break;
      case "member_fenced": {
        const old = this.lanes.get(event.member_id);
        this.end(event.member_id, ts, "fenced");
        this.lane(event.new_member_id, ts, { ...event, client_host: old?.host });
        break;
      }
      case "rebalance_started":
        this.marker(ts, event.cause, event.member_id, { generation: event.generation_id, reason: event.reason });
        if (this.protocol !== "cooperative") for (const lane of this.lanes.values()) lane.releaseAll(ts);
        break;
      case "join_completed":
        for (const member of event.members ?? []) this.lane(member, ts);
        break;
      case "sync_completed": {
        this.protocol = event.rebalance_protocol === "cooperative" ? "cooperative" : "eager";
        const assignments = event.assignments ?? {};
        for (const [member, topics] of Object.entries(assignments)) {
          for (const [topic, partitions] of Object.entries(topics)) {
            for (const p of partitions) this.partitions.set(tp(topic, p), { topic, partition: p });
          }
          this.lane(member, ts).holdExactly(ts, topics);
        }
        for (const lane of this.lanes.values()) if (!(lane.memberId in assignments)) lane.releaseAll(ts);
        this.closeFormation(ts);
        break;
      }
      case "group_emptied":
        this.closeFormation(ts);
        break;
      default:
        break;
    }
  }

  addConsumer(event, ts) {
    switch (event.event) {
      case "member_joined":
      case "share_member_joined":
        this.lane(event.member_id, ts, event, true);
        this.lastJoined = event.member_id;
        break;
      case "group_epoch_bumped": {
        // A subscription_changed bump right after the member's member_joined is its join (the heartbeat that joins
        // carries the subscription); otherwise a member changed what it subscribes to.
        const extra = { epoch: event.group_epoch };
        if (event.cause === "subscription_changed") {
          extra.label = event.member_id && event.member_id === this.lastJoined ? "joined" : "subscription changed";
        }
        this.lastJoined = null;
        this.marker(ts, event.cause, event.member_id, extra);
        break;
      }
      case "target_assignment_computed":
        for (const move of event.moved ?? []) {
          this.partitions.set(tp(move.topic, move.partition), { topic: move.topic, partition: move.partition });
        }
        break;
      case "member_reconciled": {
        const lane = this.lane(event.member_id, ts, undefined, true);
        for (const set of [event.assigned, event.pending_revocation]) {
          for (const [topic, partitions] of Object.entries(set ?? {})) {
            for (const p of partitions) this.partitions.set(tp(topic, p), { topic, partition: p });
          }
        }
        lane.holdExactly(ts, event.assigned, event.pending_revocation);
        lane.epochs.push({ ts, epoch: event.member_epoch });
        lane.state = event.state;
        break;
      }
      case "member_expired":
        this.expiries.set(event.member_id, event);
        if (event.timer === "session") this.noteSilence({ since_last_heartbeat_ms: event.timeout_ms, ...event }, ts);
        break;
      case "member_left": {
        if (event.cause === "static_leave") break; // it stays, with its partitions, for its next instance
        const cause = { expired: "expired", kicked: "kicked", removed: "fenced" }[event.cause] ?? "left";
        this.end(event.member_id, ts, cause);
        break;
      }
      case "member_fenced": {
        const old = this.lanes.get(event.member_id);
        this.end(event.member_id, ts, "fenced");
        const lane = this.lane(event.new_member_id, ts, { ...event, client_host: old?.host, client_id: old?.clientId });
        if (old) for (const bar of old.bars.filter((b) => b.end === ts)) lane.hold(ts, bar.topic, bar.partition, bar.pending);
        break;
      }
      case "state_changed":
        if (event.to === "Stable" || event.to === "Empty") this.closeFormation(ts);
        break;
      default:
        break;
    }
  }

  // The page's event stream broke at `ms` (the broker's clock): a killed broker was alive until about then.
  streamLost(ms) {
    this.lostMs = ms;
  }

  // A stop (clean: at its time; a kill: told by the next start, the broker was last heard of at runEndMs) and the
  // start after it. A start with nothing before it is a restart when it recovered state, followed an unclean stop
  // or came after another run the page saw; otherwise it is the broker's first start, not drawn.
  restart(event, ts) {
    let last = this.restarts[this.restarts.length - 1];
    if (event.event === "broker_stopped") {
      const clean = event.clean === true;
      last = { stoppedMs: clean ? ts : null, downFromMs: clean ? ts : this.runEndMs, startedMs: null, clean,
        loadMs: null, loaded: null, dataDir: null, shown: true };
      this.restarts.push(last);
      return;
    }
    if (!last || last.startedMs !== null) {
      const recovered = Object.values(event.loaded ?? {}).some((n) => n > 0);
      last = { stoppedMs: null, downFromMs: this.runs > 1 ? this.runEndMs : null, startedMs: null,
        clean: event.clean_shutdown !== false, loadMs: null, loaded: null, dataDir: null,
        shown: recovered || event.clean_shutdown === false || this.runs > 1 };
      this.restarts.push(last);
    }
    last.startedMs = ts;
    last.loadMs = event.load_ms ?? null;
    last.loaded = event.loaded ?? {};
    last.dataDir = event.data_dir ?? null;
  }

  noteSilence(event, ts) {
    const lane = this.lanes.get(event.member_id);
    const silence = event.since_last_heartbeat_ms;
    if (lane && typeof silence === "number") lane.silence = { start: ts - silence, end: ts };
  }

  closeFormation(ts) {
    if (this.formation && this.formation.end === null) this.formation.end = ts;
  }

  // Every partition ever assigned that nobody holds now; a shaded gap runs while there are some.
  unowned() {
    const owned = new Set();
    for (const lane of this.lanes.values()) for (const key of lane.owned()) owned.add(key);
    let count = 0;
    for (const key of this.partitions.keys()) if (!owned.has(key)) count += 1;
    return count;
  }

  updateGaps(ts) {
    const count = this.partitions.size ? this.unowned() : 0;
    if (this.openGap && this.openGap.unowned !== count) {
      this.openGap.end = ts;
      if (this.openGap.end === this.openGap.start) this.gaps.pop();
      this.openGap = null;
    }
    if (count > 0 && !this.openGap) {
      this.openGap = { start: ts, end: null, unowned: count };
      this.gaps.push(this.openGap);
    }
  }

  activeLanes() {
    return [...this.lanes.values()].filter((lane) => lane.active);
  }

  departedLanes() {
    return [...this.lanes.values()].filter((lane) => !lane.active);
  }

  sortedPartitions() {
    return [...this.partitions.values()].sort((a, b) =>
      a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1,
    );
  }
}
