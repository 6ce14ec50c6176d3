// codeagent's page: a run's approvals. A run started with "Approve each
// program" stops before each execution with an approval_required event;
// the live run shows the program, what the checker and the reviewer found
// and what it asks to reach, with Approve, Reject (with a reason) and Edit
// (approve an edited program). POST /v1/runs/{id}/approvals/{approval_id}
// decides; the approval event that follows shows the decision. Loaded
// after runs.js, before app.js, whose helpers (el, api, highlight) it
// calls; everything the model wrote goes in as text.
"use strict";

function listOf(title, items, cls) {
  const box = el("div", cls || "");
  box.append(el("p", "muted", title));
  const ul = el("ul");
  for (const s of items) ul.append(el("li", "", s));
  box.append(ul);
  return box;
}

// showApproval draws approval request a in li; runID, for the run followed
// live, adds the buttons that decide it.
function showApproval(li, a, runID) {
  const box = el("div", "approval");
  box.dataset.approval = a.approval_id;
  box.dataset.language = a.language || "";
  box.append(el("h4", "", "Approval " + a.approval_id + ": may this program run?"));
  box.append(highlight(a.code || "", a.language));
  const findings = (a.findings || []).map((f) => (f.line ? "line " + f.line + ": " : "") + (f.rule || "") + " " + (f.message || ""));
  if (findings.length) box.append(listOf("The checker found:", findings, "bad"));
  else box.append(el("p", "muted", "The checker found nothing."));
  const warnings = (a.warnings || []).map((f) => "line " + f.line + ": " + (f.message || ""));
  if (warnings.length) box.append(listOf("Warnings (the code is shown as written):", warnings, "warn"));
  if ((a.concerns || []).length) box.append(listOf("The reviewer raised:", a.concerns, "bad"));
  if ((a.ask_hosts || []).length) box.append(listOf("It asks to reach (granted for this run if approved):", a.ask_hosts, "ask"));
  if ((a.ask_packages || []).length) box.append(listOf("It asks to install (granted for this run if approved):", a.ask_packages, "ask"));
  box.append(el("p", "muted", "Network: " + ((a.network || []).join(", ") || "none") +
    ((a.packages || []).length ? " · packages: " + a.packages.join(", ") : "")));
  if (runID) box.append(approvalControls(runID, a));
  li.append(box);
}

function approvalControls(runID, a) {
  const form = el("div", "approval-controls");
  const reasonID = "reason-" + runID + "-" + a.approval_id;
  const label = el("label", "", "Reason (told to the model when you reject)");
  label.htmlFor = reasonID;
  const reason = el("textarea", "reason");
  reason.id = reasonID;
  reason.rows = 2;
  const edit = el("textarea", "edit");
  edit.rows = Math.min(20, (a.code || "").split("\n").length + 1);
  edit.spellcheck = false;
  edit.value = a.code || "";
  edit.hidden = true;
  edit.setAttribute("aria-label", "The program, edited");
  const button = (text, cls) => {
    const b = el("button", cls, text);
    b.type = "button";
    return b;
  };
  const approve = button("Approve", "approve");
  const reject = button("Reject", "reject");
  const editB = button("Edit", "edit-code");
  const decide = async (decision) => {
    const body = { decision, reason: reason.value.trim() };
    if (decision === "approve" && !edit.hidden && edit.value !== a.code) body.code = edit.value;
    for (const b of [approve, reject, editB]) b.disabled = true;
    try {
      await api("/v1/runs/" + encodeURIComponent(runID) + "/approvals/" + encodeURIComponent(a.approval_id), {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      form.remove();
    } catch (e) {
      setStatus(e.message, true);
      for (const b of [approve, reject, editB]) b.disabled = false;
    }
  };
  approve.addEventListener("click", () => decide("approve"));
  reject.addEventListener("click", () => decide("reject"));
  editB.addEventListener("click", () => {
    edit.hidden = false;
    editB.disabled = true;
    approve.textContent = "Approve the edited program";
    edit.focus();
  });
  const row = el("div", "row");
  row.append(approve, reject, editB);
  form.append(edit, label, reason, row);
  return form;
}

const DECIDED = { approve: "approved", reject: "rejected", stop: "stopped", expired: "expired: nobody decided in time, so it did not run" };

// showDecision replaces approval d's buttons with its decision and, when
// the person edited the program, shows the edit: what ran instead.
function showDecision(li, d) {
  const box = [...li.querySelectorAll(".approval")].find((b) => b.dataset.approval === String(d.approval_id));
  const at = box || li;
  for (const c of at.querySelectorAll(".approval-controls")) c.remove();
  let text = d.decision === "expired" ? "Approval " + d.approval_id + " " + DECIDED.expired
    : (DECIDED[d.decision] || d.decision) + " by " + d.by;
  if (d.edited_sha256) text += ", with an edited program";
  if (d.reason) text += ": " + d.reason;
  const p = el("p", d.decision === "approve" ? "good decision" : "bad decision", text.charAt(0).toUpperCase() + text.slice(1));
  at.append(p);
  if (d.edited_code) {
    const ran = el("div", "edited");
    ran.append(el("p", "muted", "The edited program, which ran instead:"), highlight(d.edited_code, (box && box.dataset.language) || "python"));
    at.append(ran);
  }
}
