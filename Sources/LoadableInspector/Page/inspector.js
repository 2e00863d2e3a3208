// The Loadable Inspector page: the timeline from /events (server-sent events), the snapshot from
// /snapshot and /labels (read again when events arrive, at most four times a second), filters,
// and actions posted to /actions. Plain JavaScript, no framework, no other address.
"use strict";

const KINDS = [
  "syncStarted", "syncEnded", "retryScheduled", "watchdog", "leaseTaken", "leaseReleased", "invalidated",
  "cacheRestored", "cacheSaved", "cacheTouched", "cacheEvicted", "outboxEnqueued", "outboxSent", "outboxOutcome",
  "collectionPulled", "collectionPushed", "collectionConflict", "paused", "resumed",
];
const GROUPS = {
  syncStarted: "sync", syncEnded: "sync", retryScheduled: "retry", watchdog: "failure",
  leaseTaken: "lease", leaseReleased: "lease", invalidated: "retry",
  cacheRestored: "cache", cacheSaved: "cache", cacheTouched: "cache", cacheEvicted: "cache",
  outboxEnqueued: "outbox", outboxSent: "outbox", outboxOutcome: "outbox",
  collectionPulled: "collection", collectionPushed: "collection", collectionConflict: "failure",
  paused: "pause", resumed: "pause",
};
const REFRESH_INTERVAL_MS = 250;
const MAX_ROWS = 5000;

const $ = (id) => document.getElementById(id);
const timelineBody = $("timeline-body");
const timelineScroll = $("timeline-scroll");
const labelFilter = $("label-filter");
const kindFilter = $("kind-filter");
let eventCount = 0;
let refreshTimer = null;
let lastRefresh = 0;
// When the event stream last opened: the replayed events that follow at once are not "fresh".
let openedAt = 0;

function element(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (name === "class") node.className = value;
    else if (name.startsWith("data-")) node.setAttribute(name, value);
    else node[name] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function seconds(value) {
  if (value === null || value === undefined) return "—";
  return Number(value).toFixed(3);
}

function age(value) {
  if (value === null || value === undefined) return "never";
  if (value < 60) return value.toFixed(1) + " s";
  return (value / 60).toFixed(1) + " min";
}

// --- Timeline ---------------------------------------------------------------------------------

function detail(name, value, bad) {
  return element("span", { class: bad ? "detail bad" : "detail" }, element("b", {}, name + " "), value);
}

function details(event) {
  const parts = [];
  if (event.duration !== undefined) parts.push(detail("took", seconds(event.duration) + " s"));
  if (event.result !== undefined) parts.push(detail("result", event.result, event.result === "failed"));
  if (event.status !== undefined) parts.push(detail("status", event.status));
  if (event.error !== undefined) parts.push(detail("error", event.error, true));
  if (event.delay !== undefined) parts.push(detail("in", seconds(event.delay) + " s"));
  if (event.cause !== undefined) parts.push(detail("cause", event.cause === "retryAfter" ? "Retry-After" : event.cause));
  if (event.alarm !== undefined) parts.push(detail("alarm", event.alarm, event.alarm === "timedOut"));
  if (event.leases !== undefined) parts.push(detail("leases", event.leases));
  if (event.deferred !== undefined) parts.push(detail("deferred", event.deferred ? "yes, after the running sync" : "no"));
  if (event.found !== undefined) parts.push(detail("found", event.found ? "yes" : "no"));
  if (event.item !== undefined) parts.push(detail("item", event.item));
  if (event.outcome !== undefined) parts.push(detail("outcome", event.outcome, event.outcome === "failed" || event.outcome === "conflict"));
  if (event.changes !== undefined) parts.push(detail("changes", event.changes));
  if (event.record !== undefined) parts.push(detail("record", event.record));
  if (event.reason !== undefined) parts.push(detail("reason", event.reason));
  return parts;
}

function kindGroup(event) {
  if (event.kind === "syncEnded" && event.result === "failed") return "failure";
  return GROUPS[event.kind] || "other";
}

function matchesFilters(row) {
  const text = labelFilter.value.trim().toLowerCase();
  const kind = kindFilter.value;
  if (kind && row.dataset.kind !== kind) return false;
  if (text && !row.dataset.label.toLowerCase().includes(text)) return false;
  return true;
}

function applyFilters() {
  for (const row of timelineBody.rows) row.hidden = !matchesFilters(row);
}

function addEvent(event, fresh) {
  const atBottom = timelineScroll.scrollTop + timelineScroll.clientHeight >= timelineScroll.scrollHeight - 24;
  const row = element(
    "tr",
    { class: fresh ? "event fresh" : "event", "data-kind": event.kind, "data-label": event.label,
      "data-time": String(event.time), "data-index": String(eventCount) },
    element("td", { class: "time" }, seconds(event.time)),
    element("td", {}, element("span", { class: "kind", "data-group": kindGroup(event) }, event.kind)),
    element("td", { class: "label" }, event.label),
    element("td", { class: "details" }, ...details(event)),
  );
  row.hidden = !matchesFilters(row);
  timelineBody.append(row);
  while (timelineBody.rows.length > MAX_ROWS) timelineBody.deleteRow(0);
  eventCount += 1;
  const count = $("event-count");
  count.textContent = eventCount + (eventCount === 1 ? " event" : " events");
  count.dataset.count = String(eventCount);
  $("timeline-empty").hidden = true;
  if (atBottom) timelineScroll.scrollTop = timelineScroll.scrollHeight;
}

function clearTimeline() {
  timelineBody.replaceChildren();
  eventCount = 0;
  $("event-count").textContent = "0 events";
  $("event-count").dataset.count = "0";
  $("timeline-empty").hidden = false;
}

// --- Snapshot ---------------------------------------------------------------------------------

function actionButtons(label) {
  return element(
    "td", { class: "actions" },
    element("button", { class: "action", type: "button", "data-action": "sync", "data-label": label, title: "Sync " + label }, "sync"),
    element("button", { class: "action", type: "button", "data-action": "invalidate", "data-label": label, title: "Invalidate " + label }, "invalidate"),
  );
}

const STATE_NAMES = { didSyncSuccessfully: "synced", didFailToSync: "failed" };

function stateBadge(state) {
  return element("span", { class: "state", "data-state": state, title: state }, STATE_NAMES[state] || state);
}

function fillTable(id, rows, columns, emptyText) {
  const body = $(id).tBodies[0];
  if (rows.length === 0) {
    body.replaceChildren(element("tr", {}, element("td", { class: "none", colSpan: columns }, emptyText)));
  } else {
    body.replaceChildren(...rows);
  }
}

function showSnapshot(snapshot, labels) {
  $("snapshot-time").textContent = "at t = " + seconds(snapshot.time) + " s";
  $("clock").textContent = "t = " + seconds(snapshot.time) + " s";
  $("offline-toggle").checked = snapshot.isOfflineSimulated;
  fillTable("entries", snapshot.entries.map((entry) => element(
    "tr", { class: "entry", "data-label": entry.label, "data-key": entry.key, "data-state": entry.state },
    element("td", { class: "label", title: entry.error || "" }, entry.label),
    element("td", {}, stateBadge(entry.state), entry.isStale ? element("span", { class: "stale" }, "stale") : null),
    element("td", {}, age(entry.age)),
    element("td", {}, entry.leases),
    element("td", {}, entry.hasPendingChanges ? "yes" : "no"),
    actionButtons(entry.label),
  )), 6, "No live store entries.");
  fillTable("collections", snapshot.collections.map((collection) => element(
    "tr", {
      class: "collection", "data-label": collection.label, "data-state": collection.state,
      "data-records": String(collection.records), "data-pending": String(collection.pending),
      "data-conflicts": String(collection.conflicts), "data-leases": String(collection.leases),
    },
    element("td", { class: "label" }, collection.label),
    element("td", {}, stateBadge(collection.state)),
    element("td", {}, age(collection.age)),
    element(
      "td", { class: "counts" },
      element("span", {}, collection.records + " shown"),
      element("span", { class: collection.pending ? "warn" : "" }, collection.pending + " pending"),
      element("span", { class: collection.conflicts ? "bad" : "" },
        collection.conflicts + (collection.conflicts === 1 ? " conflict" : " conflicts")),
      element("span", {}, collection.leases + (collection.leases === 1 ? " lease" : " leases")),
    ),
    actionButtons(collection.label),
  )), 5, "No live synced collections.");
  fillTable("outbox", snapshot.outboxItems.map((item) => element(
    "tr", { class: "outbox-item", "data-outbox": item.outbox, "data-item": item.id, "data-status": item.status },
    element("td", { class: "label" }, item.outbox),
    element("td", { class: "label", title: item.id }, item.id.slice(0, 8)),
    element("td", {}, item.scope || "—"),
    element("td", { title: item.error || "" }, stateBadge(item.status)),
    element("td", {}, item.attempts),
  )), 5, "The outboxes are empty.");
  const shown = new Set([...snapshot.entries.map((e) => e.label), ...snapshot.collections.map((c) => c.label)]);
  fillTable("loadables", labels.filter((label) => !shown.has(label)).map((label) => element(
    "tr", { class: "loadable", "data-label": label },
    element("td", { class: "label" }, label),
    actionButtons(label),
  )), 2, "No other loadables seen yet.");
}

async function refreshSnapshot() {
  refreshTimer = null;
  lastRefresh = Date.now();
  try {
    const [snapshot, labels] = await Promise.all([
      fetch("/snapshot").then((response) => response.json()),
      fetch("/labels").then((response) => response.json()),
    ]);
    showSnapshot(snapshot, labels);
  } catch (error) {
    toast("Could not read the snapshot: " + error, true);
  }
}

function scheduleRefresh() {
  if (refreshTimer !== null) return;
  const wait = Math.max(0, REFRESH_INTERVAL_MS - (Date.now() - lastRefresh));
  refreshTimer = setTimeout(refreshSnapshot, wait);
}

// --- Actions ----------------------------------------------------------------------------------

let toastTimer = null;
function toast(text, bad) {
  const node = $("toast");
  node.textContent = text;
  node.className = bad ? "shown bad" : "shown";
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { node.className = ""; }, 2500);
}

async function act(action) {
  try {
    const response = await fetch("/actions", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(action),
    });
    const answer = await response.json();
    if (response.ok) {
      toast(action.action === "setOffline" ? (action.offline ? "Offline simulated" : "Back online")
        : action.action + " " + action.label);
    } else {
      toast(answer.error || response.statusText, true);
    }
  } catch (error) {
    toast("The action failed: " + error, true);
  }
  scheduleRefresh();
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button.action");
  if (!button) return;
  act({ action: button.dataset.action, label: button.dataset.label });
});

$("offline-toggle").addEventListener("change", (event) => {
  act({ action: "setOffline", offline: event.target.checked });
});

labelFilter.addEventListener("input", applyFilters);
kindFilter.addEventListener("change", applyFilters);
for (const kind of KINDS) kindFilter.append(element("option", { value: kind }, kind));

// --- Events -----------------------------------------------------------------------------------

function connect() {
  const source = new EventSource("/events");
  const connection = $("connection");
  source.onopen = () => {
    // The server sends every recorded event first: a reconnection starts over.
    clearTimeline();
    openedAt = Date.now();
    connection.dataset.state = "open";
    connection.textContent = "live";
  };
  source.onmessage = (message) => {
    try {
      addEvent(JSON.parse(message.data), Date.now() - openedAt > 1000);
    } catch (error) {
      return;
    }
    scheduleRefresh();
  };
  source.onerror = () => {
    connection.dataset.state = source.readyState === EventSource.CLOSED ? "closed" : "connecting";
    connection.textContent = source.readyState === EventSource.CLOSED ? "disconnected" : "reconnecting…";
  };
}

connect();
refreshSnapshot();
