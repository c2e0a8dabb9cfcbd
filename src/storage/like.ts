/** Text matching shared by the discovery stores of both backends (LIKE with `\` as the escape). */

/** Sorts above every character a tag may hold, so [prefix, prefix + this) is the range of tags with that prefix. */
export const TAG_RANGE_END = '\x7f'

const escapeLike = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`)

/** `word%`: `%`, `_` and `\` in the word taken literally. */
export const likePrefix = (word: string): string => `${escapeLike(word)}%`

/** `%substring%`: `%`, `_` and `\` in the substring taken literally. */
export const substringLike = (name: string): string => `%${escapeLike(name)}%`
