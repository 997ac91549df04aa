// The meeting page's making of a meeting (meeting.js runs it): the service's answers, the languages
// a meeting can use here, and share links as the creator's page lists them.
/* global window */
import { inviteLink, peoplesMessage } from "/playground/meeting-logic.js";

const $ = (id) => document.getElementById(id);

/** POSTs JSON to the service; throws its error message (`{"error": {"code", "message"}}`). */
export async function post(path, body, apiKey, nameOf) {
  const response = await fetch(path, {
    method: "POST",
    headers: {
      ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
      "content-type": "application/json",
    },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const message = answer.error?.message ?? `the service answered HTTP ${response.status}`;
    const error = new Error(peoplesMessage(message, nameOf));
    error.code = answer.error?.code;
    throw error;
  }
  return answer;
}

/**
 * The recognition this server offers, for the people of a meeting: which languages are heard. What
 * the operator could do about it goes under "For the server's operator", not in people's way.
 */
function explainRecognition(tier, recognized, nameOf) {
  if (!tier?.upgrade) return;
  $("operator-hint").textContent = `${tier.summary}. ${tier.upgrade}`;
  $("operator").hidden = false;
  return (
    `This server recognizes speech in ${recognized.map(nameOf).join(", ") || "no language"} only: ` +
    "people who speak another language hear the meeting translated, but nobody hears them."
  );
}

/**
 * The languages a meeting can use here: spoken by the configured engines (voice output) and either
 * recognized, or reached by translation from a recognized language: those are listen-only (their
 * participants hear the others and are not heard), as the server decides too.
 */
export async function loadLanguages({ nameOf, setStatus }) {
  const report = await fetch("/v1/languages").then((response) => response.json());
  const recognized = new Set(report.recognition.map((entry) => entry.language));
  const voiced = new Set(report.voice_output.map((entry) => entry.language));
  const reached = new Set(
    report.translation.filter((pair) => recognized.has(pair.from)).map((pair) => pair.to),
  );
  const usable = [...voiced].filter((code) => recognized.has(code) || reached.has(code));
  const label = (code) => (recognized.has(code) ? nameOf(code) : `${nameOf(code)} (listens only)`);
  const options = usable.map((code) => [code, label(code)]).sort(([, a], [, b]) => a.localeCompare(b));
  const preferred = [navigator.language.split("-")[0], "en", "es", "de", "fr"].filter((code) =>
    usable.includes(code),
  );
  // A recognized language first, so the creator can speak.
  const defaults = [
    ...new Set([...preferred.filter((code) => recognized.has(code)), ...preferred, ...usable]),
  ];
  const heard = explainRecognition(report.recognition_tier, [...recognized], nameOf);
  if (usable.length < 2 || !usable.some((code) => recognized.has(code)))
    setStatus(
      `A meeting needs two languages this server speaks, one of them recognized; it has ` +
        `${usable.map(nameOf).join(", ") || "none"}.`,
      true,
    );
  else if (heard) setStatus(heard);
  document.querySelectorAll("#languages select").forEach((select, index) => {
    const none = index === 0 ? [] : [["", "—"]];
    const selected = index < 2 ? (defaults[index] ?? "") : "";
    select.replaceChildren(
      ...[...none, ...options].map(([value, label]) => {
        const option = new Option(label, value);
        option.selected = value === selected;
        return option;
      }),
    );
  });
}

export function shareLinkItem({ language, invitation, identity }, nameOf) {
  const link = inviteLink(location.origin, invitation);
  const item = document.createElement("li");
  item.dataset.language = language;
  const anchor = Object.assign(document.createElement("a"), {
    className: "share-link",
    href: link,
    target: "_blank",
    rel: "noopener noreferrer",
    textContent: link,
  });
  anchor.dataset.language = language;
  anchor.dataset.identity = identity ?? "";
  const copy = Object.assign(document.createElement("button"), { textContent: "Copy" });
  // Without the clipboard (a plain-HTTP page not at localhost), the link is selected to copy by hand.
  const select = () => window.getSelection()?.selectAllChildren(anchor);
  copy.addEventListener("click", () => {
    if (!navigator.clipboard) return select();
    navigator.clipboard.writeText(link).then(() => (copy.textContent = "Copied"), select);
  });
  item.append(`${nameOf(language)}: `, anchor, copy);
  return item;
}
