import type { LanguageCode } from "../core/contracts.js";

/** About 5 s of ordinary speech per language (others are measured on the English text). */
export const REFERENCE_SENTENCES: Readonly<Record<LanguageCode, string>> = {
  en: "Good morning, and thank you all for coming. Today we will talk about our plans for the year.",
  es: "Buenos días y gracias a todos por venir. Hoy vamos a hablar de nuestros planes para este año.",
  fr: "Bonjour et merci à tous d'être venus. Aujourd'hui, nous allons parler de nos projets pour cette année.",
  de: "Guten Morgen und vielen Dank, dass Sie alle gekommen sind. Heute sprechen wir über unsere Pläne für dieses Jahr.",
  it: "Buongiorno e grazie a tutti per essere venuti. Oggi parliamo dei nostri progetti per quest'anno.",
  pt: "Bom dia e obrigado a todos por terem vindo. Hoje vamos falar sobre os nossos planos para este ano.",
  ru: "Доброе утро и спасибо всем, что пришли. Сегодня мы поговорим о наших планах на этот год.",
  // Kana only: eSpeak NG 1.51 reads each kanji as the English word "Chinese".
  ja: "おはようございます。きょうは みなさんと ことしの けいかくに ついて はなしたいと おもいます。",
  ko: "안녕하세요. 와 주셔서 감사합니다. 오늘은 올해의 계획에 대해 이야기하겠습니다.",
  zh: "大家早上好，谢谢你们的到来。今天我们来谈谈今年的计划。",
};
