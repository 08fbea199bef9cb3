/** Prefix of every servegate canary marker; the pattern finds markers of any request. */
const CANARY_PREFIX = 'SGREQ'
const ANY_MARKER = /SGREQ-\d+-\d{5}/g

/**
 * The marker request `index` of a plan seeded `seed` must begin its reply with.
 * @example canaryMarker(17, 3) // 'SGREQ-17-00003'
 */
export function canaryMarker(seed: number, index: number): string {
  return `${CANARY_PREFIX}-${seed}-${String(index).padStart(5, '0')}`
}

/** The sentence added to a prompt that asks for the marker. */
export function canaryInstruction(marker: string): string {
  return `Start your reply with the exact marker ${marker} and nothing before it.`
}

export interface CanaryCheck {
  marker: string
  /** The reply's content, leading whitespace ignored, starts with the marker. */
  atStart: boolean
  /** Other requests' markers found in the reply (an engine mixing up streams). */
  foreignMarkers: string[]
  /** False when the content capture was cut short: the check then fails closed. */
  captureComplete: boolean
  passed: boolean
  /** Why it failed; null when it passed. */
  reason: string | null
}

/**
 * Checks a reply's content (never its reasoning) against its own marker.
 * @example checkCanary('SGREQ-1-00002', 'SGREQ-1-00002 Sure…', true).passed // true
 */
export function checkCanary(marker: string, content: string, captureComplete: boolean): CanaryCheck {
  const atStart = content.trimStart().startsWith(marker)
  const foreignMarkers = [...new Set((content.match(ANY_MARKER) ?? []).filter((m) => m !== marker))]
  const reason = !captureComplete
    ? 'the reply exceeded the capture bound, so it cannot be checked (fails closed)'
    : foreignMarkers.length > 0
      ? `the reply contains another request's marker (${foreignMarkers.slice(0, 3).join(', ')})`
      : !atStart
        ? `the reply does not start with its marker ${marker}`
        : null
  return { marker, atStart, foreignMarkers, captureComplete, passed: reason === null, reason }
}

/** The reply with every canary marker removed, so a marker's digits never score as an answer. */
export function withoutMarkers(content: string): string {
  return content.replace(ANY_MARKER, ' ')
}
