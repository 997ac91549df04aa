// Types of meeting-logic.js (plain JavaScript, served to browsers as it is) for the TypeScript tests.

export const TRANSLATOR_IDENTITY: "translation-agent";
export const SPEC_TRACK: "translated-audio";
export const INPUT_RATE: 16000;
export const MICROPHONE: Readonly<{
  channelCount: 1;
  echoCancellation: true;
  noiseSuppression: true;
  autoGainControl: true;
}>;

export interface Invite {
  room: string;
  token: string;
  language?: string | undefined;
  livekit?: string;
}

export function inviteLink(origin: string, invitation: string): string;
export function tokenLink(origin: string, invite: Invite): string;
export function liveKitServerUrl(url: string): string | undefined;
export function parseInvite(
  hash: string | undefined,
): Invite | { invitation: string } | { error: string } | undefined;
export function isEmbeddedRoomUrl(url: string, room: string): boolean;
export function livekitUrlOf(access: { url: string; room_name: string }): string | undefined;
export function roomSocketUrl(origin: string, room: string, token: string): string;
export function translatorTrackFor(
  trackNames: Iterable<string>,
  language: string | undefined,
  trackLanguages?: Readonly<Record<string, string>>,
): string | undefined;
export function trackLanguagesOf(attributes?: Readonly<Record<string, string>>): Record<string, string>;
export function languageName(code: string, locales?: readonly string[]): string;
export function participantLabel(
  identity: string,
  language: string | undefined,
  self: string | undefined,
  name?: string,
): string;
export function participantOf(entry: unknown): {
  identity: string;
  language: string | undefined;
  name: string | undefined;
};
export function closeMessage(
  code: number,
  reason: string | undefined,
  options?: { leaving?: boolean; joined?: boolean },
): { state: "left" | "ended" | "failed" | "disconnected"; text: string };
export function toPcm16Le(samples: ArrayLike<number>): ArrayBuffer;
export function fromFloat32Le(bytes: ArrayBuffer): Float32Array;
export class Framer {
  constructor(size: number);
  push(block: Float32Array): Float32Array[];
}
export function livekitCloseMessage(
  reason: string | undefined,
  options?: { leaving?: boolean },
): { state: "left" | "ended" | "disconnected"; text: string };
export function peoplesMessage(message: string, nameOf: (code: string) => string): string;
