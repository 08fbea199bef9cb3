/**
 * Text from outside servegate (engine and model names, cell ids, test names, reasons, error
 * messages, file names) placed in the Markdown servegate writes: the board, the PR comment and
 * the job summary. GitHub renders them; whatever a name holds must render as that text and
 * nothing else: no tag, no link, no extra table row or column, no mention.
 */

/** A zero-width space, as an entity so the raw file shows it: it breaks what GitHub links after rendering. */
const NO_LINK = '&#8203;'

/** Line breaks end a table row or a list item: a name stays on its line. */
const LINE_BREAKS = /\r\n?|[\n\t\v\f\u0085\u2028\u2029]/g

/** Control characters and the bidirectional overrides and isolates, which can make text read as other text. */
const INVISIBLE = /[\p{Cc}\u202a-\u202e\u2066-\u2069]/gu

/**
 * Everything that can start markup inline:
 * - `\` `` ` `` `*` `~` `|` `$`: escapes, code spans, emphasis, strikethrough, table cells, math;
 * - `&` `<`: entities, raw HTML (tags, comments, `</details>`) and `<https://…>` autolinks;
 * - a run of `_` (emphasis unless inside a word);
 * - `]` before `(`, `[` or `:`: inline links and images, reference links, link definitions;
 * - `://`, `www.`, `@` and `#` before a digit: what GitHub links by itself (URLs, e-mail
 *   addresses, @mentions, issue references), even after the Markdown is rendered.
 */
const MARKUP = /[\\`*~|$&<]|_+|\](?=[([:])|:(?=\/\/)|(?<=www)\.|@|#(?=\d)/gi

const WORD = /[\p{L}\p{N}]/u

/**
 * `text` as inline Markdown that renders as `text`: for a table cell, or after other text on a
 * line (never to start a line, where `#`, `>`, `-` or `1.` would open a block; servegate's
 * own words start every line it writes). Line breaks and tabs become spaces; control characters
 * and bidirectional overrides become U+FFFD. What renders is the text itself, with zero-width
 * spaces after `@`, in `://` and `www.`, and after `#` before a digit, so GitHub links none of
 * them. Ordinary punctuation (`"`, `>`, `-`, `(`, `[`, `_` inside a word) is left as written,
 * so the raw file stays readable: with `<` escaped, no text can open a tag or an attribute.
 * @example markdownText('a | b <svg onload=alert(1)>') // 'a \\| b &lt;svg onload=alert(1)>'
 */
export function markdownText(text: string): string {
  const line = text.replace(LINE_BREAKS, ' ').replace(INVISIBLE, '\uFFFD')
  return line.replace(MARKUP, (m: string, at: number) => {
    if (m === '&') return '&amp;'
    if (m === '<') return '&lt;'
    if (m === '@' || m === '#') return `${m}${NO_LINK}`
    if (m === ':') return `:${NO_LINK}`
    if (m === '.') return `${NO_LINK}.`
    if (m.startsWith('_')) {
      // Inside a word (snake_case, ENGINE_EXITED) a run of `_` opens no emphasis: kept as written.
      const inWord = WORD.test(line[at - 1] ?? '') && WORD.test(line[at + m.length] ?? '')
      return inWord ? m : m.replace(/_/g, '\\_')
    }
    return `\\${m}`
  })
}
