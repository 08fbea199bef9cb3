import { Marked } from 'marked'
import { describe, expect, test } from 'vitest'
import { markdownText } from './markdown-text.ts'

/** GitHub-flavoured Markdown as marked renders it, raw HTML passed through as GitHub's renderer would. */
const gfm = new Marked({ gfm: true })

/** `text` in a one-column table row and in a list item, rendered. */
function rendered(text: string): { cell: string; item: string } {
  const table = gfm.parse(`| name | n |\n| --- | --- |\n| ${markdownText(text)} | 1 |\n`, { async: false })
  const row = /<tbody>\s*<tr>([\s\S]*?)<\/tr>\s*<\/tbody>/.exec(table)?.[1] ?? table
  const list = gfm.parse(`- found: ${markdownText(text)}\n`, { async: false })
  return { cell: row, item: list }
}

/** What a renderer shows for text: its HTML's text, entities decoded, less the zero-width spaces. */
function shown(html: string): string {
  return html
    .replace(/<[^>]+>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&#8203;|\u200b/g, '')
    .replace(/&amp;/g, '&')
    .trim()
}

describe('markdownText', () => {
  test.for([
    '<svg onload=alert(1)>',
    '</script>',
    '</details><details open>',
    '<!-- hidden',
    '<https://evil.example>',
    '[click](https://evil.example)',
    '![pixel](https://evil.example/p.png)',
    '[ref][x] and [x]: https://evil.example',
    '`code`',
    '*em* _em_ **strong** __strong__ ~~struck~~',
    '$x^2$',
    'back\\slash\\',
    '&lt;svg&gt; &amp;',
  ])('%j renders as itself, with no tag, link or emphasis, in a table cell and a list item', (text) => {
    for (const html of Object.values(rendered(text))) {
      expect(html).not.toMatch(/<(?!\/?(td|li|ul|p)\b)[a-z!/]/)
      expect(shown(html)).toContain(text)
    }
  })

  test('a pipe or a line break keeps the name in its cell: the row has its two cells, no forged row', () => {
    const { cell } = rendered('a | b\n| forged | row |\r\nc')
    expect(cell.split('<td').length - 1).toBe(2)
    expect(shown(cell)).toBe('a | b | forged | row | c\n1')
  })

  test('what GitHub links by itself (URLs, www., e-mail addresses, @mentions, #issues) gets a zero-width space', () => {
    expect(markdownText('https://evil.example www.evil.example WWW.x a@b.example @octocat #12 #x')).toBe(
      'https:&#8203;//evil.example www&#8203;.evil.example WWW&#8203;.x a@&#8203;b.example @&#8203;octocat #&#8203;12 #x',
    )
    expect(rendered('see https://evil.example').cell).not.toContain('<a ')
  })

  test('ordinary text stays as written: words with underscores, quotes, >, brackets without a link', () => {
    const text = 'ENGINE_EXITED: "c4 > wins decode" 1.05× [1.01×, 1.09×] (12/12) qwen3-8b_ctx-1024'
    expect(markdownText(text)).toBe(text)
  })

  test('control characters and bidirectional overrides cannot hide or reorder text', () => {
    expect(markdownText('a\u202eb\u0000c\u2066d\te')).toBe('a\uFFFDb\uFFFDc\uFFFDd e')
  })
})
