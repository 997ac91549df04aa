// The meeting page's captions (meeting.js shows them): one item per utterance, holding its
// original and the translation this page received.
/* global window */

/**
 * Shows one transcript message in `list`: the item of its utterance (speaker and correlation id,
 * kept in `utterances`) gets or updates its line of that kind and language. Every translation
 * received for an utterance whose original it shows is shown, whatever its language: the server
 * decides who hears what. `labelOf(identity)`
 * names the speaker. Returns what the line is: { kind, participant, language }.
 */
export function showCaption(list, utterances, message, labelOf) {
  const kind = message.type === "original_transcript" ? "original" : "translated";
  const participant = message.participant ?? "";
  const language =
    message.language ??
    (kind === "original"
      ? (message.detected_language ?? message.source_language)
      : message.target_language) ??
    "";
  const text = kind === "translated" ? (message.translated_text ?? message.text) : message.text;
  const key = `${participant} ${message.correlation_id}`;
  let item = utterances.get(key);
  // A translation of an utterance whose original this page never saw (it joined after the original
  // was said) would be a fragment of a conversation shown as what was said: left out.
  if (!item && kind === "translated") return { kind, participant, language };
  if (!item) {
    item = document.createElement("li");
    Object.assign(item.dataset, { participant, correlationId: message.correlation_id ?? "" });
    const who = Object.assign(document.createElement("span"), {
      className: "who",
      textContent: labelOf(participant),
    });
    who.dataset.participant = participant;
    item.append(who);
    utterances.set(key, item);
    const follow =
      list.lastElementChild === null ||
      window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    list.append(item);
    if (follow) item.scrollIntoView({ block: "end" });
  }
  let line = [...item.querySelectorAll(".caption")].find(
    (candidate) => candidate.dataset.kind === kind && candidate.dataset.language === language,
  );
  if (!line) {
    line = Object.assign(document.createElement("p"), { className: "caption" });
    Object.assign(line.dataset, { kind, participant, language });
    item.append(line);
  }
  line.dataset.final = String(message.is_final === true);
  line.textContent = `[${language}] ${text}`;
  return { kind, participant, language };
}
